#!/usr/bin/env python3
"""The cost of FTPS: RETR throughput and CPU per GiB, plain FTP vs explicit
FTPS, for tpd, pyftpdlib and vsftpd, in one run.

Each server is started twice by the local backend (runner.backends.local), once plain
and once with ``tls: explicit`` and the run's certificates (runner.tls.certs, ECDSA
P-256 unless ``--key rsa-2048``); the server is pinned to CPU 0 and this process (the
load generator) to CPU 1 when the machine has two. For each of ``--rounds`` rounds, every
(server, mode) pair runs, interleaved so that drift hits all alike:

* ``retr`` (runner.load.ftp.workloads, xferlab's client): one session repeats RETR of a
  ``--size-mib`` fixture for ``--duration`` s: throughput (MiB/s), server CPU per GiB
  (user+system of the server's process tree over the phase, runner.metrics.sampler) and
  client CPU per GiB (this process, ``os.times``);
* ``login``: ``--logins`` concurrent sessions connect and log in (FTPS: greeting, AUTH TLS,
  handshake, USER/PASS, PBSZ, PROT): client CPU per login (us) and, for FTPS, the
  control connection's TLS handshake time p50/p99 (ms).

Printed: the median of each figure over the rounds, per server and mode, and per server
the ratio FTPS / plain of each (measured in this run). A server that cannot run (tpd built
without TLS, a missing binary) is printed as skipped with the reason. CPU figures are the
kernel's 10 ms ticks: RETR phases of a second or more take hundreds of ms of CPU.

    .venv/bin/python benchmarks/ftps.py [--servers tpd,pyftpdlib,vsftpd] [--rounds 3]
        [--duration 2] [--size-mib 256] [--logins 100] [--key ecdsa-p256] [--quick]

``--quick`` (1 round, 0.5 s, 32 MiB, 20 logins) finishes within a minute here. A pair
whose phase fails (errors; the logins are bound to 30 s, 10 s with --quick) is printed as failed with
the first errors, and the others go on (vsftpd's listen backlog of 32 makes 100 concurrent
logins wait for SYN retransmissions, 1 + 2 + 4 + 8 s: docs/methodology.md, "Slow is a
figure"). With 20 logins the client CPU per login is near the 10 ms tick: coarse. Network
traffic is loopback only; every server started is stopped at the end.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runner.backends.base import ServerSkipped  # noqa: E402
from runner.backends.local.backend import LocalBackend  # noqa: E402
from runner.catalogue.workloads import WorkloadParams  # noqa: E402
from runner.load.base import LoadError  # noqa: E402
from runner.load.ftp.driver import DRIVER  # noqa: E402
from runner.load.result import latency_stats  # noqa: E402
from runner.metrics.sampler import TreeSampler  # noqa: E402
from runner.spec.request import ServerRequest  # noqa: E402
from runner.tls.certs import KEY_TYPES, campaign_certificates  # noqa: E402

GIB = 1 << 30
MODES = ("plain", "explicit")


def _pin() -> tuple[list[int] | None, int | None]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    return [cpus[0]], cpus[1]


def _retr(handle: Any, params: WorkloadParams) -> dict[str, float]:
    sampler = TreeSampler(handle.pid)
    c0 = sampler.cpu_times()
    r = DRIVER.run("retr", handle.target, params)
    c1 = sampler.cpu_times()
    if r.errors or not r.bytes:
        raise RuntimeError(f"RETR failed: {r.errors} {r.notes}")
    gib = r.bytes / GIB
    return {"mib_s": r.throughput_mib_s, "server_s_gib": (c1[0] - c0[0] + c1[1] - c0[1]) / gib,
            "client_s_gib": (r.client_cpu_user_s + r.client_cpu_system_s) / gib}


def _login(handle: Any, params: WorkloadParams) -> dict[str, float]:
    r = DRIVER.run("login", handle.target, params)
    if r.errors or not r.ops:
        raise RuntimeError(f"login failed: {r.errors} {r.notes}")
    out = {"client_us_login": (r.client_cpu_user_s + r.client_cpu_system_s) * 1e6 / r.ops}
    if r.tls_handshake_ms:
        st = latency_stats(r.tls_handshake_ms)
        out.update({"hs_p50_ms": st["p50"], "hs_p99_ms": st["p99"]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--servers", default="tpd,pyftpdlib,vsftpd")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2.0, help="s of RETR per pair per round")
    ap.add_argument("--size-mib", type=int, default=256, help="RETR fixture, MiB")
    ap.add_argument("--logins", type=int, default=100, help="concurrent logins per login phase")
    ap.add_argument("--key", choices=KEY_TYPES, default=KEY_TYPES[0])
    ap.add_argument("--quick", action="store_true", help="1 round, 0.5 s, 32 MiB, 20 logins")
    a = ap.parse_args(argv)
    if a.quick:
        a.rounds, a.duration, a.size_mib, a.logins = 1, 0.5, 32, 20
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the servers (finally) on SIGTERM too
    server_cpu, client_cpu = _pin()
    if client_cpu is not None:
        os.sched_setaffinity(0, {client_cpu})
    retr_p = WorkloadParams(duration=a.duration, transfer_size=a.size_mib << 20, op_timeout=60, phase_timeout=120)
    bound = 10 if a.quick else 30  # s: the login phase's bound
    login_p = WorkloadParams(clients=a.logins, op_timeout=bound, connect_timeout=bound, phase_timeout=bound)
    backend = LocalBackend(auto_fetch=True)
    handles: dict[tuple[str, str], Any] = {}
    skipped: dict[tuple[str, str], str] = {}
    figures: dict[tuple[str, str], list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="xferlab-ftps-bench-") as tmp:
        certs = campaign_certificates("bench", a.key, folder=Path(tmp) / "certs")
        try:
            for server in a.servers.split(","):
                for mode in MODES:
                    req = ServerRequest(server, variant={"tls": "explicit"} if mode != "plain" else {},
                                        tls=certs if mode != "plain" else None)
                    try:
                        handles[(server, mode)] = backend.start(req, cpu=server_cpu)
                    except ServerSkipped as e:
                        skipped[(server, mode)] = str(e)
            for rnd in range(a.rounds):
                for key, h in handles.items():
                    try:
                        fig = {**_retr(h, retr_p), **_login(h, login_p)}
                    except (RuntimeError, LoadError) as e:  # reported, the other pairs go on
                        print(f"round {rnd + 1}/{a.rounds} {key[0]} {key[1]}: failed: {str(e)[:300]}", flush=True)
                        continue
                    figures.setdefault(key, []).append(fig)
                    print(f"round {rnd + 1}/{a.rounds} {key[0]} {key[1]}: {fig['mib_s']:,.0f} MiB/s, server "
                          f"{fig['server_s_gib']:.3f} s/GiB, client {fig['client_s_gib']:.3f} s/GiB", flush=True)
        finally:
            for h in handles.values():
                h.stop()
    cols = [("mib_s", "RETR MiB/s", "{:,.0f}"), ("server_s_gib", "server s/GiB", "{:.3f}"),
            ("client_s_gib", "client s/GiB", "{:.3f}"), ("client_us_login", "client us/login", "{:,.0f}"),
            ("hs_p50_ms", "handshake p50 ms", "{:.2f}"), ("hs_p99_ms", "handshake p99 ms", "{:.2f}")]
    med = {k: {c: statistics.median(f[c] for f in v) for c, _, _ in cols if c in v[0]} for k, v in figures.items()}
    print(f"\nmedians of {a.rounds} round(s); RETR {a.size_mib} MiB fixture for {a.duration:g} s, {a.logins} logins; "
          f"key {certs.key_type}; server CPU {server_cpu}, client CPU {client_cpu}")
    print(f"{'server':<10} {'mode':<9}" + "".join(f"{t:>18}" for _, t, _ in cols))
    for server in a.servers.split(","):
        for mode in MODES:
            if (server, mode) in skipped:
                print(f"{server:<10} {mode:<9} skipped: {skipped[(server, mode)]}")
                continue
            m = med.get((server, mode), {})
            print(f"{server:<10} {mode:<9}" + "".join(f"{fmt.format(m[c]) if c in m else '-':>18}"
                                                      for c, _, fmt in cols))
        p, t = med.get((server, "plain")), med.get((server, "explicit"))
        if p and t:
            ratios = [(c, t[c] / p[c]) for c, _, _ in cols[:4] if p.get(c)]
            print(f"{server:<10} {'ftps/plain':<9}" + "".join(f"{r:>17.2f}x" for _, r in ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
