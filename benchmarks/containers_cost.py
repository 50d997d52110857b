"""What containerization costs: one server, same load generator, local vs docker backend.

    .venv/bin/python benchmarks/containers_cost.py [--server pyftpdlib] [--repeats 3]
        [--clients 300] [--duration 3] [--configs local,netns,bridge,host] [--isolate]

Each *config* is a way to run the server: ``local`` (the local backend: a process on
this machine) or a docker network mode (``netns``, the default: the load generator
joins the container's network namespace; ``bridge``: through the veth pair and
Docker's bridge; ``host``: the host's namespace). ``--isolate`` adds configs that each
remove one more part of the container from the default ``netns`` path, to show where
a cost goes: ``netns-noseccomp`` (``security_opt seccomp=unconfined``: no syscall
filter), ``netns-nomemlimit`` (no memory limit, so the fixture's page cache is charged
to an unlimited cgroup), ``netns-tmpfs`` (the home on tmpfs instead of a volume).

On each of ``--repeats`` rounds, every config gets a fresh server start (configs
interleaved, so drift hits all alike) and measures: RETR (single stream, ``--duration``
s of a 256 MiB fixture, MiB/s), the server's CPU per GiB sent (user+system of its
process tree, /proc, s/GiB) and N concurrent clients connect+login (elapsed s). Server
pinned to CPU 0, load generator to CPU 1 (when there are two). The version run locally
is the one the docker image holds (read from the container), so both sides run the
same release. Prints medians, the ratio to ``local`` and the raw figures. Traffic
stays on this machine (loopback, the containers' own namespaces, Docker's bridge).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: config name -> (docker network mode or None for local, extra variant, containers.run overrides)
CONFIGS: dict[str, tuple[str | None, dict, dict]] = {
    "local": (None, {}, {}),
    "netns": ("netns", {}, {}),
    "bridge": ("bridge", {}, {}),
    "host": ("host", {}, {}),
    "netns-noseccomp": ("netns", {}, {"security_opt": ["seccomp=unconfined"]}),
    "netns-nomemlimit": ("netns", {}, {"mem_limit": None, "memswap_limit": None}),
    "netns-tmpfs": ("netns", {"storage": "tmpfs"}, {}),
}
ISOLATE = ("netns-noseccomp", "netns-nomemlimit", "netns-tmpfs")


SYNCOOKIES = "/proc/sys/net/ipv4/tcp_syncookies"


def _host_syncookies(value: str | None) -> str | None:
    """Set the host's net.ipv4.tcp_syncookies to ``value`` (None: leave it); returns the
    previous value, or None when it cannot be read or set (not root)."""
    try:
        with open(SYNCOOKIES) as f:
            old = f.read().strip()
        if value is not None and value != old:
            with open(SYNCOOKIES, "w") as f:
                f.write(value)
        return old
    except OSError:
        return None


def _one(backend, req, cpu, p_retr, p_login) -> dict[str, float]:
    from runner.load.ftp.workloads import run_workload_sync
    from runner.metrics.tree import cpu_sample  # the lab's server CPU, reaped children included

    t0 = time.monotonic()
    h = backend.start(req, cpu=cpu)
    out = {"start": time.monotonic() - t0}
    try:
        c0 = sum(cpu_sample(h.pid)) if h.pid else 0.0
        r = run_workload_sync("retr", h.target, p_retr)
        c1 = sum(cpu_sample(h.pid)) if h.pid else 0.0
        if r.error_count:
            raise RuntimeError(f"{backend.name} {req.variant}: retr errors {r.errors}")
        out["retr"] = r.throughput_mib_s
        out["cpu_gib"] = (c1 - c0) / (r.bytes / (1 << 30)) if r.bytes else float("nan")
        r = run_workload_sync("login", h.target, p_login)
        if r.error_count:
            raise RuntimeError(f"{backend.name} {req.variant}: login errors {r.errors}")
        out["login"] = r.elapsed_s
    finally:
        h.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print the table. Returns 0; raises on server failures,
    SystemExit(2) on an unknown config name."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", default="pyftpdlib")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clients", type=int, default=300)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--configs", default="local,netns,bridge,host",
                    help=f"comma-separated, from: {', '.join(CONFIGS)}")
    ap.add_argument("--isolate", action="store_true", help=f"add {', '.join(ISOLATE)}")
    ap.add_argument("--keep-host-syncookies", action="store_true",
                    help="leave the host's net.ipv4.tcp_syncookies as it is (by default it is set to 0 for the run, "
                         "as in every container and the tuning role: with SYN cookies a server with a short "
                         "backlog loses sessions, docs/methodology.md 'Slow is a figure')")
    a = ap.parse_args(argv)
    names = [n.strip() for n in a.configs.split(",") if n.strip()]
    if a.isolate:
        names += [n for n in ISOLATE if n not in names]
    bad = [n for n in names if n not in CONFIGS]
    if bad:
        ap.error(f"unknown config(s) {', '.join(bad)}; known: {', '.join(CONFIGS)}")
    if "local" not in names:
        names.insert(0, "local")

    from runner.backends import ServerRequest, get_backend
    from runner.backends.docker import DockerBackend
    from runner.catalogue.workloads import WorkloadParams

    cpus = sorted(os.sched_getaffinity(0))
    server_cpu = [cpus[0]] if len(cpus) >= 2 else None
    if len(cpus) >= 2:
        os.sched_setaffinity(0, [cpus[1]])
    p_retr = WorkloadParams(duration=a.duration, transfer_size=256 << 20)
    p_login = WorkloadParams(clients=a.clients, login_mode="concurrent")

    def say(m: str) -> None:
        print(f"  [docker] {m}", file=sys.stderr)

    labels = {"xferlab.bench": "containers_cost"}
    backends: dict[str, object] = {"local": get_backend("local", progress=lambda m: print(f"  [local] {m}",
                                                                                       file=sys.stderr))}
    for n in names:
        net, _, over = CONFIGS[n]
        if net is not None:
            backends[n] = DockerBackend(progress=say, labels=labels, network=net, run_overrides=over)
    probe_name = next((n for n in names if n != "local"), None)
    version = None
    if probe_name:
        probe = backends[probe_name].start(ServerRequest(a.server))
        version = probe.build_info.get("version")
        probe.stop()
    local_version = version if a.server in ("pyftpdlib", "twisted") else None
    old_cookies = _host_syncookies(None if a.keep_host_syncookies else "0")
    now = _host_syncookies(None)
    print(f"host net.ipv4.tcp_syncookies: {now}" + (f" (was {old_cookies}; restored at the end)"
                                                    if old_cookies is not None and old_cookies != now else ""))
    try:
        return _rounds(a, names, backends, version, local_version, server_cpu, cpus, p_retr, p_login)
    finally:
        if old_cookies is not None:
            _host_syncookies(old_cookies)


def _rounds(a, names, backends, version, local_version, server_cpu, cpus, p_retr, p_login) -> int:
    """The measured rounds and the printed table (see :func:`main`)."""
    from runner.backends import ServerRequest

    print(f"{a.server} {version}: {a.repeats} rounds, a fresh start per config per round; server CPU {server_cpu}, "
          f"client CPU {cpus[1] if len(cpus) >= 2 else 'any'}; configs {', '.join(names)}")
    res: dict[str, dict[str, list[float]]] = {n: {"retr": [], "cpu_gib": [], "login": [], "start": []} for n in names}
    for rnd in range(a.repeats):
        for n in names:
            net, variant, _ = CONFIGS[n]
            req = ServerRequest(a.server, version=local_version if net is None else None, variant=variant)
            got = _one(backends[n], req, server_cpu, p_retr, p_login)
            for k, v in got.items():
                res[n][k].append(v)
            print(f"  round {rnd + 1}/{a.repeats} {n:17} RETR {got['retr']:8.1f} MiB/s  server CPU "
                  f"{got['cpu_gib']:.3f} s/GiB  {a.clients} logins {got['login']:.3f} s", file=sys.stderr, flush=True)
    med = {n: {k: statistics.median(v) for k, v in r.items()} for n, r in res.items()}
    rows = [("RETR (server -> client), MiB/s", "retr", "{:,.1f}"),
            ("server CPU per GiB sent, s/GiB", "cpu_gib", "{:.3f}"),
            (f"{a.clients} concurrent clients (connect, login), s", "login", "{:.3f}"),
            ("server start until login answers, s", "start", "{:.2f}")]
    width = max(12, *(len(n) + 2 for n in names))
    print(f"\n{'median of ' + str(a.repeats):42}" + "".join(f"{n:>{width}}" for n in names))
    for label, k, fmt in rows:
        print(f"{label:42}" + "".join(f"{fmt.format(med[n][k]):>{width}}" for n in names))
        base = med["local"][k]
        print(f"{'  ratio to local':42}" + "".join(f"{med[n][k] / base:>{width - 1}.2f}x" if base else
                                                    f"{'n/a':>{width}}" for n in names))
    print("\nraw:", {n: {k: [round(x, 3) for x in v] for k, v in r.items()} for n, r in res.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
