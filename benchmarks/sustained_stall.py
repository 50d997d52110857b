#!/usr/bin/env python3
"""The coordinated-omission correction of the open loop, measured (docs/methodology.md,
"Sustained load"): ``retr_sustained`` as an open loop against tpd, once undisturbed and
once with tpd stopped by SIGSTOP for ``--stall`` s from ``--at`` s into the phase; prints the
percentiles of the latency from each operation's intended start (the stored ``latency``)
and from its actual start (``service_time``). Loopback only; tpd is built with make.

    .venv/bin/python benchmarks/sustained_stall.py [--rate 200] [--clients 2]
        [--duration 2] [--stall 0.5] [--at 0.8] [--size-kib 16]
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner.catalogue.workloads import WorkloadParams  # noqa: E402
from runner.load import hdr  # noqa: E402
from runner.load.ftp.workloads import run_workload_sync  # noqa: E402
from runner.load.target import Target  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=200.0, help="target operations/s")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--duration", type=float, default=2.0, help="s (at most 30)")
    ap.add_argument("--stall", type=float, default=0.5, help="s tpd is stopped")
    ap.add_argument("--at", type=float, default=0.8, help="s into the phase the stall starts")
    ap.add_argument("--size-kib", type=int, default=16)
    a = ap.parse_args()
    if not 0 < a.duration <= 30 or a.at + a.stall > a.duration:
        ap.error("need 0 < duration <= 30 and at + stall <= duration")
    subprocess.run(["make", "-C", str(ROOT / "servers" / "tpd"), "all"], check=True, capture_output=True, timeout=300)
    with tempfile.TemporaryDirectory(prefix="xferlab-stall-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (Path(tmp) / "users.txt").write_text(f"alice:{{plain}}secret:{home}:rw\n")
        port = free_port()
        proc = subprocess.Popen([str(ROOT / "servers" / "tpd" / "build" / "tpd"), "--ftp-listen", f"127.0.0.1:{port}",
                                 "--users", str(Path(tmp) / "users.txt"), "--log-level", "warn"])
        try:
            for _ in range(150):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.1)
            target = Target(host="127.0.0.1", port=port, user="alice", password="secret", root=home)
            params = WorkloadParams(clients=a.clients, file_size=a.size_kib * 1024, duration=a.duration,
                                    rate=a.rate, session="reuse", op_timeout=10, connect_timeout=10)
            for stall in (False, True):
                def stop_for_a_while() -> None:
                    time.sleep(a.at)
                    os.kill(proc.pid, signal.SIGSTOP)
                    time.sleep(a.stall)
                    os.kill(proc.pid, signal.SIGCONT)

                t = threading.Thread(target=stop_for_a_while)
                # the checkpoint "loaded" comes when the sessions are logged in and the phase begins
                try:
                    r = run_workload_sync("retr_sustained", target, params,
                                          checkpoint=(lambda name, t=t: t.start()) if stall else None)
                finally:
                    if t.ident is not None:
                        t.join()
                    os.kill(proc.pid, signal.SIGCONT)
                for key, name in (("latency", "from the intended start"), ("service", "from the actual start")):
                    pct = hdr.percentiles_ms(r.histograms[key])
                    print(f"{'stall' if stall else 'no stall':8s} {name:24s} {r.ops} ops, errors {r.errors or 0}: "
                          + ", ".join(f"{k} {v:.2f} ms" for k, v in pct.items()))
        finally:
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            proc.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
