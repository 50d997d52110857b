"""What containerization costs: one server, same load generator, local vs docker backend.

    .venv/bin/python benchmarks/containers_cost.py [--server pyftpdlib] [--repeats 3]
        [--clients 300] [--duration 3] [--network bridge|host]

For each backend, ``--repeats`` fresh server starts; on each: RETR (single stream,
``--duration`` s of a 256 MiB fixture, MiB/s) and N concurrent clients connect+login
(elapsed s). Server pinned to CPU 0, load generator to CPU 1 (when there are two).
The version run locally is the one the docker image holds (read from the container),
so both sides run the same release. Prints medians and the docker/local ratio.
Network traffic stays on loopback / Docker's bridge of this machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def _measure(backend, req, cpu, params_retr, params_login, repeats: int) -> dict[str, list[float]]:
    from runner.load.run import run_workload_sync

    out: dict[str, list[float]] = {"retr": [], "login": [], "start": []}
    for _ in range(repeats):
        t0 = time.monotonic()
        h = backend.start(req, cpu=cpu)
        out["start"].append(time.monotonic() - t0)
        try:
            r = run_workload_sync("retr", h.target, params_retr)
            if r.error_count:
                raise RuntimeError(f"{backend.name}: retr errors {r.errors}")
            out["retr"].append(r.throughput_mib_s)
            r = run_workload_sync("login", h.target, params_login)
            if r.error_count:
                raise RuntimeError(f"{backend.name}: login errors {r.errors}")
            out["login"].append(r.elapsed_s)
        finally:
            h.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print the table. Returns 0; raises on server failures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default="pyftpdlib")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", type=int, default=300)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--network", default="bridge", choices=("bridge", "host"))
    a = ap.parse_args(argv)

    from runner.backends import ServerRequest, get_backend
    from runner.workloads import WorkloadParams

    cpus = sorted(os.sched_getaffinity(0))
    server_cpu = [cpus[0]] if len(cpus) >= 2 else None
    if len(cpus) >= 2:
        os.sched_setaffinity(0, [cpus[1]])
    p_retr = WorkloadParams(duration=a.duration, transfer_size=256 << 20)
    p_login = WorkloadParams(clients=a.clients, login_mode="concurrent")

    dock = get_backend("docker", progress=lambda m: print(f"  [docker] {m}", file=sys.stderr),
                       labels={"xferlab.bench": "containers_cost"})
    probe = dock.start(ServerRequest(a.server, variant={"network": a.network}))
    version = probe.build_info.get("version")
    probe.stop()
    local_version = version if a.server in ("pyftpdlib", "twisted") else None
    local = get_backend("local", progress=lambda m: print(f"  [local] {m}", file=sys.stderr))
    print(f"{a.server} {version}: {a.repeats} fresh starts per backend, server CPU {server_cpu}, "
          f"client CPU {cpus[1] if len(cpus) >= 2 else 'any'}, docker network {a.network}")
    res = {
        "local": _measure(local, ServerRequest(a.server, version=local_version), server_cpu, p_retr, p_login,
                          a.repeats),
        "docker": _measure(dock, ServerRequest(a.server, variant={"network": a.network}), server_cpu, p_retr,
                           p_login, a.repeats),
    }
    med = {b: {k: statistics.median(v) for k, v in r.items()} for b, r in res.items()}
    rows = [("RETR (server -> client), MiB/s", "retr", "{:,.1f}"),
            (f"{a.clients} concurrent clients (connect, login), s", "login", "{:.3f}"),
            ("server start until login answers, s", "start", "{:.2f}")]
    print(f"\n{'metric (median of ' + str(a.repeats) + ')':50} {'local':>10} {'docker':>10} {'docker/local':>13}")
    for label, k, fmt in rows:
        lo, do = med["local"][k], med["docker"][k]
        print(f"{label:50} {fmt.format(lo):>10} {fmt.format(do):>10} {do / lo:>12.2f}x")
    print("\nraw:", {b: {k: [round(x, 3) for x in v] for k, v in r.items()} for b, r in res.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
