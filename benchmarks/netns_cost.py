"""What the host's network namespace and the server's interpreter cost: one pyftpdlib
server, the same load generator, in the host's namespace vs a fresh one.

    .venv/bin/python benchmarks/netns_cost.py [--repeats 5] [--python PY ...]

For each interpreter (``--python``, repeatable; default this one, which has pyftpdlib
as a test dependency) and each namespace (``host``: the machine's namespace, with
whatever netfilter rules and connection tracking it carries, e.g. Docker's; ``own``: a
new namespace made by ``unshare --net`` with only ``lo`` up, which the load generator
joins, ``Target.netns``), a fresh server per round (configs interleaved) measures RETR
(single stream, 3 s of a 256 MiB fixture, MiB/s), the server's CPU per GiB sent, and
300 concurrent logins (s). Server on the first CPU, load generator on the second.

Why: docs/methodology.md, "The cost of containers": a server in a container's own
namespace was faster than the same server run locally; this separates the two causes
found (the host namespace's netfilter path, and the interpreter build of the Python
servers). Needs root and ``unshare`` (util-linux) for the ``own`` namespace; loopback
only. Prints medians and the ratio to the first config.
"""
from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

UNSHARE = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']


def _start(python: str, own_ns: bool, home: Path, cpu: int | None) -> tuple[subprocess.Popen, int]:
    from loadgen_selftest import PASSWORD, SERVER, USER

    p = subprocess.Popen((UNSHARE if own_ns else []) + [python, "-c", SERVER, str(home), USER, PASSWORD],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if cpu is not None:
        os.sched_setaffinity(p.pid, {cpu})
    ready = select.select([p.stdout], [], [], 15)[0]
    line = p.stdout.readline() if ready else ""
    if not line.startswith("PORT "):
        p.kill()
        raise RuntimeError(f"pyftpdlib ({python}, own namespace {own_ns}) did not start: {p.stderr.read()[:500]}")
    return p, int(line.split()[1])


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the table; returns 0. Raises RuntimeError when a server
    does not start or a phase has errors."""
    from loadgen_selftest import PASSWORD, USER

    from runner.catalogue.workloads import WorkloadParams
    from runner.load.ftp.workloads import run_workload_sync
    from runner.load.target import Target
    from runner.metrics.tree import cpu_sample

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--python", action="append", help="interpreter with pyftpdlib (repeatable)")
    a = ap.parse_args(argv)
    pythons = a.python or [sys.executable]
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu = cpus[0] if len(cpus) >= 2 else None
    if len(cpus) >= 2:
        os.sched_setaffinity(0, {cpus[1]})
    home = Path(tempfile.mkdtemp(prefix="xferlab-netns-cost-"))
    configs = [(py, ns) for py in pythons for ns in (False, True)]
    label = {c: f"{'own' if c[1] else 'host'} ns, {c[0]}" for c in configs}
    res: dict[tuple[str, bool], dict[str, list[float]]] = {c: {"retr": [], "cpu": [], "login": []} for c in configs}
    for rnd in range(a.repeats):
        for py, ns in configs:
            p, port = _start(py, ns, home, server_cpu)
            try:
                t = Target("127.0.0.1", port, USER, PASSWORD, root=home, netns=f"/proc/{p.pid}/ns/net" if ns else None)
                c0 = sum(cpu_sample(p.pid))
                r = run_workload_sync("retr", t, WorkloadParams(duration=3, transfer_size=256 << 20))
                c1 = sum(cpu_sample(p.pid))
                lg = run_workload_sync("login", t, WorkloadParams(clients=300, login_mode="concurrent"))
                if r.error_count or lg.error_count:
                    raise RuntimeError(f"{label[(py, ns)]}: errors {r.errors} {lg.errors}")
            finally:
                p.kill()
                p.wait()
            res[(py, ns)]["retr"].append(r.throughput_mib_s)
            res[(py, ns)]["cpu"].append((c1 - c0) / (r.bytes / (1 << 30)))
            res[(py, ns)]["login"].append(lg.elapsed_s)
        print(f"round {rnd + 1}/{a.repeats}: " + ", ".join(f"{label[c]} {res[c]['retr'][-1]:.0f} MiB/s"
                                                          for c in configs), flush=True)
    base = configs[0]
    print(f"\nmedians of {a.repeats} rounds (ratio to {label[base]})")
    for c in configs:
        m = {k: statistics.median(v) for k, v in res[c].items()}
        b = {k: statistics.median(v) for k, v in res[base].items()}
        print(f"{label[c]:60} RETR {m['retr']:8.1f} MiB/s ({m['retr'] / b['retr']:.2f}x)  server CPU "
              f"{m['cpu']:.3f} s/GiB ({m['cpu'] / b['cpu']:.2f}x)  300 logins {m['login']:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
