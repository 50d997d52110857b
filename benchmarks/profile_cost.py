"""What profiling a cell costs the figure it measures (docs/methodology.md, "Server profiles").

For each of ``rounds`` rounds, each server of :data:`SERVERS` runs each workload of
:data:`WORKLOADS` once per mode of :data:`MODES` (unprofiled; the on-CPU sampler alone,
perf or py-spy at 99 Hz; the full profile, ``profile: true``, with off-CPU and syscalls),
interleaved, the order of the modes rotating from round to round, as whole cells
through ``run_local_cell`` on the local backend (one fresh server per cell, warm-up on):

* ``retr``: 4 clients reading a 64 MiB fixture for 3 s: **MiB/s**;
* ``login``: 300 concurrent logins: **seconds** for all of them.

Printed: per (server, workload) the median of each mode, the ratio of each profiled mode
to the unprofiled one and the spread (max/min - 1) of the unprofiled cells, so the cost can be set against the
run-to-run noise. Run as root: ``PYTHONPATH=. .venv/bin/python benchmarks/profile_cost.py [ROUNDS]
[SERVER:WORKLOAD,...]``.
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
#: Modes: name -> the spec's ``profile`` value.
MODES: dict[str, object] = {"plain": False, "sampling": {"rate_hz": 99, "off_cpu": False, "syscalls": False},
                            "off_cpu": {"rate_hz": 99, "off_cpu": True, "syscalls": False},
                            "syscalls": {"rate_hz": 99, "off_cpu": False, "syscalls": True},
                            "full": True}


def run_cell(backend: LocalBackend, server: str, workload: str, profile: object) -> tuple[float, float | None]:
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
    if profile is not False and out.profile is None:
        raise SystemExit(f"{server} {workload}: no profile recorded")
    r = out.result
    fig = r.bytes / MIB / r.elapsed_s if workload == "retr" else r.elapsed_s
    return fig, out.profile.on_cpu_s if out.profile else None


def main(rounds: int = 5, only: tuple[str, ...] = ()) -> None:
    """Run the rounds and print the table (see the module docstring); ``only``: the
    ``server:workload`` pairs to run (default: all)."""
    backend = LocalBackend(progress=lambda m: None)
    figs: dict[tuple[str, str, str], list[float]] = {}
    names = list(MODES)
    pairs = [(s, w) for s in SERVERS for w in WORKLOADS if not only or f"{s}:{w}" in only]
    for i in range(rounds):
        for server, workload in pairs:
            for mode in names[i % len(names):] + names[:i % len(names)]:
                fig, _ = run_cell(backend, server, workload, MODES[mode])
                figs.setdefault((server, workload, mode), []).append(fig)
                print(f"round {i + 1} {server:9} {workload:5} {mode:8} {fig:10.3f}", flush=True)
    head = "".join(f"{m:>10}" for m in names) + "".join(f"{m + '/plain':>15}" for m in names[1:])
    print(f"\n{'server':9} {'workload':8} {'unit':5} {head} {'plain spread':>12}")
    for server, workload in pairs:
        med = {m: statistics.median(figs[(server, workload, m)]) for m in names}
        plain = figs[(server, workload, "plain")]
        unit = "MiB/s" if workload == "retr" else "s"
        cols = "".join(f"{med[m]:10.3f}" for m in names) + "".join(f"{med[m] / med['plain']:15.3f}" for m in names[1:])
        print(f"{server:9} {workload:8} {unit:5} {cols} {max(plain) / min(plain) - 1:12.1%}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else ())
