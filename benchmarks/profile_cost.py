"""What profiling a cell costs the figure it measures (docs/methodology.md, "Server profiles").

For each of ``rounds`` rounds, each server of :data:`SERVERS` runs each workload of
:data:`WORKLOADS` twice, unprofiled and profiled (``profile: true``: perf or py-spy at
99 Hz, off-CPU and syscalls on), interleaved and in alternating order, as whole cells
through ``run_local_cell`` on the local backend (one fresh server per cell, warm-up on):

* ``retr``: 4 clients reading a 64 MiB fixture for 3 s: **MiB/s**;
* ``login``: 300 concurrent logins: **seconds** for all of them.

Printed: per (server, workload) the median of each mode, the ratio profiled/unprofiled
and the spread (max/min - 1) of the unprofiled cells, so the cost can be set against the
run-to-run noise. Run as root: ``PYTHONPATH=. .venv/bin/python benchmarks/profile_cost.py [ROUNDS]``.
"""
from __future__ import annotations

import statistics
import sys

from runner.backends.local import LocalBackend
from runner.cell.local import run_local_cell
from runner.spec.model import parse_spec
from runner.store.models import Cell

MIB = 1 << 20
SERVERS = ("tpd", "pyftpdlib")
WORKLOADS = {"retr": {"clients": 4, "transfer_size": 64 * MIB, "duration": 3.0},
             "login": {"clients": 300, "login_mode": "concurrent"}}


def run_cell(backend: LocalBackend, server: str, workload: str, profile: bool) -> tuple[float, float | None]:
    """One cell; returns (its figure: MiB/s for retr, seconds for login; the profile's
    on-CPU seconds or None)."""
    spec = parse_spec({"name": "profile cost", "repeats": 1, "backend": "local", "profile": profile,
                       "servers": [{"name": server}], "workloads": [{"name": workload, "params": WORKLOADS[workload]}]})
    srv = spec.servers[0]
    cell = Cell(id=1, seq=0, server=server, server_label=srv.display(), server_spec=srv.model_dump(mode="json"),
                workload=workload, params=spec.workloads[0].params.model_dump(mode="json"), params_key="", repeat=0)
    out = run_local_cell(cell, spec, backend)
    if out.status != "done" or out.result is None:
        raise SystemExit(f"{server} {workload} profile={profile}: {out.status}: {out.error}")
    if profile and out.profile is None:
        raise SystemExit(f"{server} {workload}: no profile recorded")
    r = out.result
    fig = r.bytes / MIB / r.elapsed_s if workload == "retr" else r.elapsed_s
    return fig, out.profile.on_cpu_s if out.profile else None


def main(rounds: int = 5) -> None:
    """Run the rounds and print the table (see the module docstring)."""
    backend = LocalBackend(progress=lambda m: None)
    figs: dict[tuple[str, str, bool], list[float]] = {}
    for i in range(rounds):
        for server in SERVERS:
            for workload in WORKLOADS:
                order = (False, True) if i % 2 == 0 else (True, False)
                for prof in order:
                    fig, _ = run_cell(backend, server, workload, prof)
                    figs.setdefault((server, workload, prof), []).append(fig)
                    print(f"round {i + 1} {server:9} {workload:5} {'profiled' if prof else 'plain':8} {fig:10.3f}",
                          flush=True)
    print(f"\n{'server':9} {'workload':8} {'unit':5} {'plain':>10} {'profiled':>10} {'ratio':>7} {'plain spread':>12}")
    for server in SERVERS:
        for workload in WORKLOADS:
            plain, prof = figs[(server, workload, False)], figs[(server, workload, True)]
            a, b = statistics.median(plain), statistics.median(prof)
            unit = "MiB/s" if workload == "retr" else "s"
            spread = max(plain) / min(plain) - 1
            print(f"{server:9} {workload:8} {unit:5} {a:10.3f} {b:10.3f} {b / a:7.3f} {spread:12.1%}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
