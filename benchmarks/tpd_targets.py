#!/usr/bin/env python3
"""Benchmark the tpd targets and print the figures.

Targets (servers/tpd issue):
  1. single-stream RETR of a 1 GiB file on loopback >= 90% of the loopback
     TCP limit measured in the same run (plain socket sender -> the same
     receiver code; iperf3 is printed for reference when installed);
  2. 10,000 idle logged-in FTP sessions: server USS < 64 MiB, and RETR
     throughput on one more session within 5% of the throughput with no
     idle sessions;
  3. 300 concurrent connect+login faster than pyftpdlib (same run).

The server side is pinned to CPU 0, clients to CPU 1 (when the machine has
two CPUs); every figure is the median of --runs runs.  Network traffic is
loopback only.  Usage:

    .venv/bin/python benchmarks/tpd_targets.py [--size-mib 1024] [--runs 3]
        [--idle 10000] [--logins 300] [--only retr,idle,login]
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


def role_plain_recv(port_file: str) -> dict:
    """Plain TCP receiver: listen, accept one sender, count to EOF."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(1)
    Path(port_file).write_text(str(ls.getsockname()[1]))
    ls.settimeout(60)
    c, _ = ls.accept()
    t0 = time.perf_counter()
    total = recv_all(c)
    dt = time.perf_counter() - t0
    return {"bytes": total, "seconds": dt, "gbps": total * 8 / dt / 1e9}


def role_plain_send(port: int, nbytes: int) -> dict:
    """Plain TCP sender: send nbytes from a memory buffer."""
    s = socket.create_connection(("127.0.0.1", port))
    chunk = memoryview(b"\0" * (1 << 20))
    left = nbytes
    while left > 0:
        n = s.send(chunk[: min(len(chunk), left)])
        left -= n
    s.close()
    return {}


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--idle", type=int, default=10000)
    ap.add_argument("--per-round", type=int, default=3,
                    help="RETR samples per idle-session round (with and without)")
    ap.add_argument("--logins", type=int, default=300)
    ap.add_argument("--only", default="retr,idle,login")
    ap.add_argument("--binary", default=None, help="tpd binary (default: build with make)")
    a = ap.parse_args()

    if a.role:
        r = a.role
        if r[0] == "retr":
            out = role_retr(int(r[1]), r[2])
        elif r[0] == "plain-recv":
            out = role_plain_recv(r[1])
        elif r[0] == "plain-send":
            out = role_plain_send(int(r[1]), int(r[2]))
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
                limits, tpds = [], []
                for _ in range(a.runs * a.per_round):
                    pf = tmp / "port"
                    if pf.exists():
                        pf.unlink()
                    recv = subprocess.Popen([sys.executable, __file__, "--role", "plain-recv", str(pf)],
                                            stdout=subprocess.PIPE, preexec_fn=lambda: pin(CLIENT_CPU))
                    for _ in range(200):
                        if pf.exists() and pf.read_text():
                            break
                        time.sleep(0.02)
                    send = subprocess.Popen([sys.executable, __file__, "--role", "plain-send",
                                             pf.read_text(), str(size)],
                                            stdout=subprocess.DEVNULL, preexec_fn=lambda: pin(SERVER_CPU))
                    out, _ = recv.communicate(timeout=300)
                    send.wait(timeout=60)
                    limits.append(json.loads(out.decode().strip())["gbps"])
                    tpds.append(run_role(["retr", str(srv.port), "big.bin"])["gbps"])
                lim, got = median(limits), median(tpds)
                ratio = got / lim
                print(f"retr.loopback_limit_gbps     {lim:8.2f}   (plain socket sender->receiver, n={len(limits)}, min {min(limits):.2f}, max {max(limits):.2f})")
                print(f"retr.tpd_gbps                {got:8.2f}   (n={len(tpds)}, min {min(tpds):.2f}, max {max(tpds):.2f})")
                print(f"retr.ratio                   {ratio:8.3f}   target >= 0.90  {'PASS' if ratio >= 0.9 else 'FAIL'}")
                ok &= ratio >= 0.9
                if shutil.which("iperf3"):
                    ip = free_port()
                    s3 = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(ip), "-A", str(SERVER_CPU)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(0.5)
                    p = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(ip), "-R", "-A", str(CLIENT_CPU),
                                        "-n", str(size), "-J"], capture_output=True, timeout=300)
                    s3.wait(timeout=30)
                    try:
                        bps = json.loads(p.stdout)["end"]["sum_received"]["bits_per_second"]
                        print(f"retr.iperf3_gbps (reference) {bps / 1e9:8.2f}   (C receiver; not the comparison baseline)")
                    except (ValueError, KeyError):
                        print("retr.iperf3_gbps (reference)      n/a")
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
