#!/usr/bin/env python3
"""Benchmark the tpd targets and print the figures.

Targets (servers/tpd issue):
  1. single-stream RETR of a 1 GiB file on loopback >= 90% of the loopback
     limit measured in the same run (docs/methodology.md, "The loopback
     limit"): limit = C sendfile sender -> C receiver (runner/selftest/netlimit.c,
     every variant of runner.selftest.limit.VARIANTS: recv(2) or splice(2),
     buffer and pipe sizes, with and without SO_RCVLOWAT; the best variant's
     median is the limit), tpd = tpd -> the same C receiver (FTP PASV +
     RETR), so tpd/limit <= 1; a ratio above 1.0 is refused (the limit is
     wrong) and fails the target.  Samples of --duration s each,
     limit and tpd interleaved per round (order alternating).  Also printed,
     as information: tpd -> a Python recv_into receiver, and iperf3 -Z as a
     cross-check when installed;
  2. 10,000 idle logged-in FTP sessions: server USS < 64 MiB, and RETR
     throughput on one more session within 5% of the throughput with no
     idle sessions;
  3. 300 concurrent connect+login faster than pyftpdlib (same run).

The server side (tpd, the C sender, the iperf3 sender) is pinned to CPU 0,
clients and receivers to CPU 1 (when the machine has two CPUs); socket
buffers are left to kernel autotuning everywhere.  Every figure is the
median of its samples.  Network traffic is loopback only.  Usage:

    .venv/bin/python benchmarks/tpd_targets.py [--size-mib 1024] [--runs 5]
        [--per-round 3] [--duration 1.0] [--idle 10000] [--logins 300]
        [--only retr,idle,login]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # runner.selftest.limit (the netlimit wrapper)
TPD_DIR = REPO / "servers" / "tpd"
RECV_BUF = 4 << 20
SERVER_CPU, CLIENT_CPU = 0, 1


def pin(cpu: int) -> None:
    """Pin the calling process to one CPU if it exists."""
    try:
        if cpu in os.sched_getaffinity(0) or os.cpu_count() > cpu:
            os.sched_setaffinity(0, {cpu})
    except OSError:
        pass


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.recv(100)
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


# --------------------------------------------------------------------------
# client roles (run in subprocesses pinned to the client CPU)
# --------------------------------------------------------------------------

def recv_all(sock: socket.socket, expect: int | None = None) -> int:
    """Receive until EOF with a large buffer; return the byte count."""
    buf = bytearray(RECV_BUF)
    view = memoryview(buf)
    total = 0
    while True:
        n = sock.recv_into(view)
        if n == 0:
            return total
        total += n


def ftp_line(f) -> str:
    """Read one final FTP reply line from a file-like control stream."""
    for _ in range(100):
        line = f.readline().decode()
        if not line:
            raise ConnectionError("control connection closed")
        if len(line) >= 4 and line[3] == " ":
            return line
    raise RuntimeError("reply too long")


def role_retr(port: int, name: str) -> dict:
    """Log in, EPSV, RETR name, measure throughput of the data stream."""
    ctl = socket.create_connection(("127.0.0.1", port), timeout=60)
    f = ctl.makefile("rb")
    ftp_line(f)
    ctl.sendall(b"USER alice\r\nPASS secret\r\nTYPE I\r\nEPSV\r\n")
    for _ in range(3):
        ftp_line(f)
    rep = ftp_line(f)
    dport = int(rep.split("|||")[1].split("|")[0])
    data = socket.create_connection(("127.0.0.1", dport), timeout=60)
    t0 = time.perf_counter()
    ctl.sendall(f"RETR {name}\r\n".encode())
    total = recv_all(data)
    dt = time.perf_counter() - t0
    data.close()
    ftp_line(f)
    ftp_line(f)
    ctl.sendall(b"QUIT\r\n")
    ctl.close()
    return {"bytes": total, "seconds": dt, "gbps": total * 8 / dt / 1e9}


def role_logins(port: int, n: int) -> dict:
    """n concurrent connect+login+QUIT sessions (non-blocking sockets on a
    selector, so the client costs little); wall time until all are done."""
    raise_nofile()
    sel = selectors.DefaultSelector()
    t0 = time.perf_counter()
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sel.register(s, selectors.EVENT_READ, [b"", 0])
    left = n
    deadline = time.monotonic() + 60
    while left and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1):
            s, st = key.fileobj, key.data
            try:
                chunk = s.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            if not chunk:
                raise ConnectionError(f"closed early: {st[0]!r}")
            st[0] += chunk
            if st[1] == 0 and b"220 " in st[0]:
                st[1] = 1
                s.send(b"USER alice\r\nPASS secret\r\n")
            if st[1] == 1 and b"230 " in st[0]:
                st[1] = 2
                s.send(b"QUIT\r\n")
            if st[1] == 2 and b"221 " in st[0]:
                sel.unregister(s)
                s.close()
                left -= 1
            elif b"\r\n5" in st[0] or st[0].startswith(b"5") or b"421 " in st[0]:
                raise RuntimeError(st[0])
    if left:
        states = [k.data[1] for k in sel.get_map().values()]
        raise TimeoutError(f"{left} logins unfinished, states {states[:20]}")
    return {"seconds": time.perf_counter() - t0}


def run_role(args: list[str], timeout: float = 600) -> dict:
    """Run this script in a client role, pinned to the client CPU."""
    p = subprocess.run([sys.executable, __file__, "--role", *args],
                       capture_output=True, timeout=timeout,
                       preexec_fn=lambda: pin(CLIENT_CPU))
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode()[-2000:])
    return json.loads(p.stdout.decode().strip().splitlines()[-1])


# --------------------------------------------------------------------------
# servers
# --------------------------------------------------------------------------

class Tpd:
    def __init__(self, binary: Path, home: Path, tmp: Path):
        users = tmp / "users.txt"
        users.write_text(f"alice:{{plain}}secret:{home}:rw\n")
        self.port = free_port()
        self.log = open(tmp / "tpd.log", "ab")
        self.proc = subprocess.Popen(
            [str(binary), "--ftp-listen", f"127.0.0.1:{self.port}", "--users", str(users),
             "--max-conns", "20000", "--idle-timeout", "3600", "--log-level", "warn"],
            stdout=self.log, stderr=self.log, preexec_fn=lambda: pin(SERVER_CPU))
        wait_port(self.port)

    def uss_mib(self) -> float:
        import psutil
        return psutil.Process(self.proc.pid).memory_full_info().uss / 2**20

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


PYFTPD_LAUNCHER = r"""
import logging, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
logging.basicConfig(level=logging.ERROR)
a = DummyAuthorizer(); a.add_user("alice", "secret", sys.argv[2], perm="elradfmw")
FTPHandler.authorizer = a
s = FTPServer(("127.0.0.1", int(sys.argv[1])), FTPHandler, backlog=4096)
s.max_cons = 0; s.max_cons_per_ip = 0
s.serve_forever(handle_exit=True)
"""


class Pyftpd:
    def __init__(self, home: Path, tmp: Path):
        self.port = free_port()
        self.log = open(tmp / "pyftpdlib.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-c", PYFTPD_LAUNCHER, str(self.port), str(home)],
                                     stdout=self.log, stderr=self.log,
                                     preexec_fn=lambda: pin(SERVER_CPU))
        wait_port(self.port)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()


# --------------------------------------------------------------------------
# idle sessions
# --------------------------------------------------------------------------

def open_idle_sessions(port: int, n: int, batch: int = 500, timeout: float = 300) -> list:
    """Open n logged-in FTP sessions with non-blocking sockets."""
    sel = selectors.DefaultSelector()
    done: list[socket.socket] = []
    deadline = time.monotonic() + timeout
    started = 0
    pending = 0
    while len(done) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(done)} idle sessions logged in")
        while pending < batch and started < n:
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            sel.register(s, selectors.EVENT_READ, [b"", False])
            started += 1
            pending += 1
        for key, _ in sel.select(timeout=1):
            s, st = key.fileobj, key.data
            try:
                chunk = s.recv(4096)
            except BlockingIOError:
                continue
            if not chunk:
                raise ConnectionError(f"session closed: {st[0]!r}")
            st[0] += chunk
            if not st[1] and b"220 " in st[0]:
                st[1] = True
                s.send(b"USER alice\r\nPASS secret\r\n")
            if b"230 " in st[0]:
                sel.unregister(s)
                done.append(s)
                pending -= 1
    sel.close()
    return done


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def median(xs):
    return statistics.median(xs)


def _cpu(cpu: int) -> int | None:
    """cpu when this process may run there (then the run is pinned), else None."""
    return cpu if cpu in os.sched_getaffinity(0) else None


def _span(xs: list[float]) -> str:
    return f"n={len(xs)}, min {min(xs):.2f}, max {max(xs):.2f}"


def _cpu_s(pid: int) -> float:
    import psutil
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def retr_targets(srv: Tpd, big: Path, size: int, rounds: int, duration: float) -> bool:
    """Target 1: the loopback limit and tpd, both into the same C receiver (netlimit),
    interleaved; prints the figures, returns whether tpd/limit >= 0.90.

    Per round and receiver variant (runner.selftest.limit.VARIANTS: recv or splice,
    buffer and pipe sizes, with and without SO_RCVLOWAT): one limit sample (C sendfile
    sender -> C receiver) and one tpd sample (tpd -> the same C receiver), order
    alternating between rounds, each ``duration`` s of whole downloads; then one
    download into the Python receiver (information). The limit is the variant with the
    highest median (runner.selftest.limit.best), tpd is judged into that variant; a
    tpd/limit above 1.0 is refused (the limit is wrong: runner.selftest.limit.share_of_limit)
    and fails the target. Also printed: each sender's CPU seconds per GiB sent
    (netlimit's rusage of its sender; psutil's user+system of tpd around the sample) and
    its busy share of wall time, and the quartiles of the per-round ratios."""
    from runner.selftest.limit import (
        VARIANTS,
        LimitTooLowError,
        NetlimitError,
        best,
        build,
        measure_ftp_retr,
        measure_pair,
        share_of_limit,
    )
    try:
        build()
    except NetlimitError as e:
        print(f"retr: FAIL, the limit cannot be measured: {e}")
        return False
    scpu, ccpu = _cpu(SERVER_CPU), _cpu(CLIENT_CPU)
    by_label = {v.label: v for v in VARIANTS}
    lim: dict[str, list[float]] = {k: [] for k in by_label}
    got: dict[str, list[float]] = {k: [] for k in by_label}
    cost: dict[tuple[str, str], list[tuple[float, float]]] = {}   # (sender, variant) CPU s per GiB
    pyrecv = []

    def one_limit(k: str) -> None:
        v = by_label[k]
        res = measure_pair(big, duration, receiver=v.receiver, bufsize=v.bufsize, rcvlowat=v.rcvlowat,
                           sender_cpu=scpu, receiver_cpu=ccpu)
        lim[k].append(res.gbps)
        cost.setdefault(("limit", k), []).append(((res.sender_cpu_s or 0.0) / (res.bytes / 2**30),
                                                  res.receiver_cpu_s / (res.bytes / 2**30)))

    def one_tpd(k: str) -> None:
        v = by_label[k]
        c0 = _cpu_s(srv.proc.pid)
        res = measure_ftp_retr(srv.port, "alice", "secret", big.name, duration, size=size, receiver=v.receiver,
                               bufsize=v.bufsize, rcvlowat=v.rcvlowat, cpu=ccpu)
        got[k].append(res.gbps)
        cost.setdefault(("tpd", k), []).append(((_cpu_s(srv.proc.pid) - c0) / (res.bytes / 2**30),
                                                res.receiver_cpu_s / (res.bytes / 2**30)))

    for i in range(rounds):
        for k in by_label:
            pair = [lambda k=k: one_limit(k), lambda k=k: one_tpd(k)]
            for fn in (pair if i % 2 == 0 else pair[::-1]):
                fn()
        pyrecv.append(run_role(["retr", str(srv.port), big.name])["gbps"])
    top, limit = best({k: median(x) for k, x in lim.items()})
    tpd = median(got[top])
    pin_txt = f"sender CPU {scpu}, receiver CPU {ccpu}"
    row = lambda name, value, text: print(f"retr.{name:<25}{value:>9}   {text}")  # noqa: E731
    row("limit_gbps", f"{limit:.2f}", f"(C sendfile sender -> C receiver {top}, the best of {len(lim)} variants, "
        f"{pin_txt}, {_span(lim[top])})")
    row("tpd_gbps", f"{tpd:.2f}", f"(tpd -> the same C receiver {top}, {_span(got[top])})")
    try:
        ratio = share_of_limit(tpd, limit, what="tpd", limit_label="limit")
    except LimitTooLowError as e:
        row("ratio", "refused", f"{e}  FAIL")
        return False
    rounds_ratio = [t / l for t, l in zip(got[top], lim[top])]
    q1, q2, q3 = statistics.quantiles(rounds_ratio, n=4) if len(rounds_ratio) > 1 else rounds_ratio * 3
    row("ratio", f"{ratio:.3f}", f"tpd/limit; per-round ratios: median {q2:.3f}, quartiles {q1:.3f}..{q3:.3f}  "
        f"target >= 0.90  {'PASS' if ratio >= 0.9 else 'FAIL'}")
    for who, gbps in (("limit", limit), ("tpd", tpd)):
        snd = median(c[0] for c in cost[who, top])
        rcv = median(c[1] for c in cost[who, top])
        gib_s = gbps / 8 / 1.073741824
        row(f"{who}_sender_cpu_s_gib", f"{snd:.3f}", f"(CPU s per GiB; busy {snd * gib_s:.0%} of wall time at the "
            f"median rate; receiver {rcv:.3f} s/GiB, busy {rcv * gib_s:.0%})")
    for k in by_label:
        if k != top:
            row("other_receiver", "", f"{k}: limit {median(lim[k]):.2f}, tpd {median(got[k]):.2f}, ratio "
                f"{median(got[k]) / median(lim[k]):.3f}   (a slower variant; info)")
    row("tpd_python_recv_gbps", f"{median(pyrecv):.2f}", f"(tpd -> Python recv_into 4 MiB, one whole download per "
        f"round, {_span(pyrecv)}; info)")
    if shutil.which("iperf3"):
        iperf3_crosscheck(size, scpu, ccpu)
    return ratio >= 0.9


def iperf3_crosscheck(size: int, scpu: int | None, ccpu: int | None) -> None:
    """iperf3 as a cross-check, not the reference: the client sends ``size`` bytes with
    -Z (sendfile), pinned like the server; the iperf3 server receives (read(2) into its
    128 KiB -l buffer), pinned like the clients; no -w (kernel autotuning)."""
    ip = free_port()
    aff = lambda c: ["-A", str(c)] if c is not None else []  # noqa: E731
    s3 = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(ip), *aff(ccpu)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        p = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(ip), "-Z", *aff(scpu), "-n", str(size), "-J"],
                           capture_output=True, timeout=300)
        s3.wait(timeout=30)
        bps = json.loads(p.stdout)["end"]["sum_received"]["bits_per_second"]
        print(f"retr.iperf3_gbps             {bps / 1e9:9.2f}   (cross-check: iperf3 -Z sender CPU {scpu} -> "
              f"iperf3 receiver CPU {ccpu}, -l 128 KiB, no -w; one run)")
    except (ValueError, KeyError, subprocess.TimeoutExpired) as e:
        print(f"retr.iperf3_gbps                   n/a   ({type(e).__name__})")
    finally:
        if s3.poll() is None:
            s3.kill()
            s3.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--per-round", type=int, default=3,
                    help="RETR samples per idle-session round (with and without)")
    ap.add_argument("--duration", type=float, default=1.0,
                    help="seconds of whole downloads per RETR limit/tpd sample (default 1.0)")
    ap.add_argument("--logins", type=int, default=300)
    ap.add_argument("--only", default="retr,idle,login")
    ap.add_argument("--binary", default=None, help="tpd binary (default: build with make)")
    a = ap.parse_args()

    if a.role:
        r = a.role
        if r[0] == "retr":
            out = role_retr(int(r[1]), r[2])
        elif r[0] == "logins":
            out = role_logins(int(r[1]), int(r[2]))
        else:
            raise SystemExit("unknown role")
        print(json.dumps(out))
        return 0

    if a.binary:
        binary = Path(a.binary)
    else:
        subprocess.run(["make", "-C", str(TPD_DIR)], check=True, capture_output=True)
        binary = TPD_DIR / "build" / "tpd"
    only = set(a.only.split(","))
    raise_nofile()
    ok = True
    with tempfile.TemporaryDirectory(prefix="tpd-bench-") as td:
        tmp = Path(td)
        home = tmp / "home"
        home.mkdir()
        size = a.size_mib << 20
        big = home / "big.bin"
        with open(big, "wb") as f:
            block = os.urandom(1 << 20)
            for _ in range(a.size_mib):
                f.write(block)
        print(f"# tpd targets: file {a.size_mib} MiB, runs={a.runs}, "
              f"server CPU {SERVER_CPU}, client CPU {CLIENT_CPU}, cpus={os.cpu_count()}")
        srv = Tpd(binary, home, tmp)
        try:
            run_role(["retr", str(srv.port), "big.bin"])          # warm the page cache
            if "retr" in only:
                ok &= retr_targets(srv, big, size, a.runs * a.per_round, a.duration)
            if "idle" in only:
                # interleaved: base run, open the idle sessions, loaded run, close them
                base, loaded, usss, opens = [], [], [], []
                uss0 = srv.uss_mib()
                for _ in range(a.runs):
                    for _ in range(a.per_round):
                        base.append(run_role(["retr", str(srv.port), "big.bin"])["gbps"])
                    t0 = time.monotonic()
                    idle = open_idle_sessions(srv.port, a.idle)
                    opens.append(time.monotonic() - t0)
                    time.sleep(1)
                    usss.append(srv.uss_mib())
                    for _ in range(a.per_round):
                        loaded.append(run_role(["retr", str(srv.port), "big.bin"])["gbps"])
                    alive = len(idle)
                    for s in idle:
                        s.close()
                    time.sleep(1)
                uss = max(usss)
                t_open = median(opens)
                b, l = median(base), median(loaded)
                delta = (b - l) / b
                print(f"idle.sessions                {alive:8d}   (opened+logged in in {t_open:.1f}s, median)")
                print(f"idle.server_uss_mib          {uss:8.1f}   (max of runs; before: {uss0:.1f})  target < 64  {'PASS' if uss < 64 else 'FAIL'}")
                print(f"idle.retr_gbps_no_idle       {b:8.2f}   (n={len(base)}, min {min(base):.2f}, max {max(base):.2f})")
                print(f"idle.retr_gbps_with_idle     {l:8.2f}   (n={len(loaded)}, min {min(loaded):.2f}, max {max(loaded):.2f})")
                print(f"idle.slowdown                {delta * 100:7.2f}%   target <= 5%  {'PASS' if delta <= 0.05 else 'FAIL'}")
                ok &= uss < 64 and delta <= 0.05
        finally:
            srv.stop()
        if "login" in only:
            times = {}
            for name in ("tpd", "pyftpdlib"):
                runs = []
                for _ in range(a.runs):
                    server = Tpd(binary, home, tmp) if name == "tpd" else Pyftpd(home, tmp)
                    try:
                        runs.append(run_role(["logins", str(server.port), str(a.logins)])["seconds"])
                    finally:
                        server.stop()
                times[name] = runs
            t, p = median(times["tpd"]), median(times["pyftpdlib"])
            print(f"login.tpd_seconds            {t:8.3f}   ({a.logins} concurrent connect+login, runs {['%.3f' % x for x in times['tpd']]})")
            print(f"login.pyftpdlib_seconds      {p:8.3f}   (runs {['%.3f' % x for x in times['pyftpdlib']]})")
            print(f"login.speedup                {p / t:8.2f}x  target > 1  {'PASS' if t < p else 'FAIL'}")
            ok &= t < p
    print(f"# overall: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
