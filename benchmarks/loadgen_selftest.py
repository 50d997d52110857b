"""Load-generator self-test: is xferlab's FTP client fast enough not to be the bottleneck?

Starts a pyftpdlib server (subprocess, 127.0.0.1, sendfile on, max_cons=0, a temp home
holding a fixture of ``--size`` MiB), then in one run measures single-stream RETR:

(a) our load generator (``runner.load.ftp.workloads.run_workload("retr")``, default params but
    ``duration``), plus variants of our session (BufferedProtocol vs
    ``loop.sock_recv_into``, buffer sizes);
(b) the reference receiver: the C receiver of ``runner.selftest.limit`` (netlimit ``ftp``:
    PASV + RETR) in each of its variants (``runner.selftest.limit.VARIANTS``: recv or
    splice, buffer and pipe sizes, with and without SO_RCVLOWAT, every technique of our
    client) on the same server and file; the fastest variant is the reference;
(c) the loopback limit, one definition for the lab (docs/methodology.md, "The loopback
    limit"): netlimit ``pair``, a C ``sendfile`` sender pinned like the server -> the
    same C receiver variants pinned like the client; the fastest variant is the limit;
(d) plain Python readers (ftplib control + raw ``socket.recv_into``, 64 KiB and 1 MiB);
(e) the ratios ours / reference (is our client the bottleneck against this server?),
    ours / limit, and reference / limit (how much of the limit the server reaches); a
    ratio to the limit above 1.0 is refused ("the limit is wrong"): nothing beats the best
    receiver on the path;
(f) client CPU seconds per GiB (``os.times()`` of this process, or the C receiver's own
    rusage), and the client's busy share of wall time (CPU s/GiB x GiB/s): below 100%
    the client had headroom, i.e. it was not the bottleneck;
(g) the client's cost before and after (benchmarks/client_cost.py, ``--cost-rounds``):
    client CPU us per login (``--clients`` concurrent) and s per GiB received and sent,
    asyncio + ``recv_into`` (the client of 2026-11-22) vs uvloop + splice (the default).

Throughput is payload bytes / summed transfer wall time, in MiB/s (2**20 B/s), each
variant reading the file whole, repeatedly, for ``--duration`` seconds; ``--repeats``
rounds, variants interleaved in each round, median printed. With 2+ CPUs the server
(and the limit's sender) is pinned to the first CPU, this process and the C receiver to
the second (``os.sched_setaffinity``). Socket buffers: kernel autotuning everywhere.
Figures are noisy on a shared machine. A benchmark printing figures, not a pass/fail
test. Without a C compiler the C rows are skipped with the reason.

Run: ``python benchmarks/loadgen_selftest.py [--size 1024] [--repeats 5] [--duration 1.5]``
or ``main(argv)`` (``xferlab selftest``). Returns 0, or 1 when the server cannot start.
"""
from __future__ import annotations

import argparse
import asyncio
import ftplib
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# benchmarks/client_cost.py, also when this file is loaded by `xferlab selftest`
sys.path.insert(0, str(Path(__file__).resolve().parent))

GIB = 1 << 30
MIB = 1 << 20
USER, PASSWORD = "selftest", "selftest"

SERVER = r"""
import logging, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import FTPHandler
from pyftpdlib.servers import FTPServer
logging.basicConfig(level=logging.ERROR)
a = DummyAuthorizer()
a.add_user(sys.argv[2], sys.argv[3], sys.argv[1], perm="elradfmwMT")
FTPHandler.authorizer = a
FTPHandler.use_sendfile = True
s = FTPServer(("127.0.0.1", 0), FTPHandler, backlog=1024)
s.max_cons = 0
s.max_cons_per_ip = 0
print("PORT", s.address[1], flush=True)
s.serve_forever(handle_exit=True)
"""


def _start_server(home: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(home), USER, PASSWORD],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 15
    line = ""
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stdout], [], [], 0.2)[0]:
            line = proc.stdout.readline()
            break
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"pyftpdlib did not start: {line!r} {proc.stderr.read()[:500]}")
    return proc, int(line.split()[1])


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def reference_read(port: int, name: str, size: int, bufsize: int, duration: float) -> tuple[float, float]:
    """Blocking reference reader: ftplib control + ``socket.recv_into(bufsize)``.
    Repeats RETR of ``name`` for at least ``duration`` s. Returns (MiB/s, CPU s per GiB)."""
    ftp = ftplib.FTP()
    ftp.connect("127.0.0.1", port, timeout=30)
    ftp.login(USER, PASSWORD)
    ftp.voidcmd("TYPE I")
    buf = bytearray(bufsize)
    mv = memoryview(buf)
    total = 0
    spent = 0.0
    c0 = _cpu()
    for _ in range(100_000):
        t0 = time.perf_counter()
        conn = ftp.transfercmd(f"RETR {name}")
        n = 0
        recv_into = conn.recv_into
        while True:
            k = recv_into(mv)
            if not k:
                break
            n += k
        conn.close()
        ftp.voidresp()
        spent += time.perf_counter() - t0
        if n != size:
            raise RuntimeError(f"reference reader: short transfer {n} of {size}")
        total += n
        if spent >= duration:
            break
    cpu = _cpu() - c0
    ftp.quit()
    return total / MIB / spent, cpu / (total / GIB)


async def _ours_session(port: int, name: str, size: int, bufsize: int, mode: str,
                        rcvlowat: int | None, duration: float) -> tuple[float, float]:
    from client_cost import retr_for

    total, spent, cpu = await retr_for("127.0.0.1", port, USER, PASSWORD, name, size, duration,
                                       buffer_size=bufsize, retr_mode=mode, rcvlowat=rcvlowat)
    return total / MIB / spent, cpu / (total / GIB)


def ours_session(port, name, size, bufsize, mode, rcvlowat, duration) -> tuple[float, float]:
    """Our FTPSession with an explicit RETR mode, buffer and SO_RCVLOWAT (None = buf/2).
    Returns (MiB/s, CPU s/GiB)."""
    return asyncio.run(_ours_session(port, name, size, bufsize, mode, rcvlowat, duration))


def ours_workload(port: int, home: Path, size: int, duration: float) -> tuple[float, float]:
    """The real thing: run_workload("retr") with default params (buffer, mode).
    Returns (MiB/s, CPU s/GiB)."""
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.ftp.workloads import run_workload_sync
    from runner.load.target import Target
    r = run_workload_sync("retr", Target("127.0.0.1", port, USER, PASSWORD, root=home),
                          WorkloadParams(transfer_size=size, duration=duration))
    if r.error_count:
        raise RuntimeError(f"run_workload errors: {r.errors} {r.notes}")
    cpu = r.client_cpu_user_s + r.client_cpu_system_s
    return r.throughput_mib_s, cpu / (r.bytes / GIB)


def c_receiver(port: int, name: str, size: int, variant, cpu: int | None,
               duration: float) -> tuple[float, float]:
    """The reference: netlimit's C receiver as an FTP client in ``variant``
    (runner.selftest.limit.Variant), pinned to ``cpu``. Returns (MiB/s, receiver CPU s per GiB)."""
    from runner.selftest.limit import measure_ftp_retr
    r = measure_ftp_retr(port, USER, PASSWORD, name, duration, size=size, receiver=variant.receiver,
                         bufsize=variant.bufsize, rcvlowat=variant.rcvlowat, cpu=cpu)
    return r.mib_s, r.receiver_cpu_s / (r.bytes / GIB)


def c_limit(path: Path, variant, cpus: tuple[int | None, int | None],
            duration: float) -> tuple[float, float]:
    """One variant of the loopback limit: netlimit's C sendfile sender (pinned to
    ``cpus[0]``) -> C receiver in ``variant`` (``cpus[1]``). Returns (MiB/s, receiver CPU s per GiB)."""
    from runner.selftest.limit import measure_pair
    r = measure_pair(path, duration, receiver=variant.receiver, bufsize=variant.bufsize, rcvlowat=variant.rcvlowat,
                     sender_cpu=cpus[0], receiver_cpu=cpus[1])
    return r.mib_s, r.receiver_cpu_s / (r.bytes / GIB)


def _best(med: dict, prefix: str) -> str | None:
    """Label of the fastest median among the rows starting with ``prefix``
    (runner.selftest.limit.best)."""
    from runner.selftest.limit import best
    rows = {k: v[0] for k, v in med.items() if k.startswith(prefix)}
    return best(rows)[0] if rows else None


def limit_ratio_lines(med: dict, ours_label: str) -> list[str]:
    """The ratio lines of the C rows of ``med`` (label -> (median MiB/s, ...)): ours /
    reference, ours / limit, reference / limit, where reference and limit are the best
    of their variants. A ratio to the limit above 1.0 is refused with the reason
    (runner.selftest.limit.share_of_limit). Empty without C rows."""
    from runner.selftest.limit import LimitTooLowError, share_of_limit
    ref, lim = _best(med, "reference: "), _best(med, "limit: ")
    if not (ref and lim):
        return []
    ours = med[ours_label][0]
    out = [f"ratio ours / reference ({ref}): {ours / med[ref][0]:.2f}",
           f"limit: the best of {sum(k.startswith('limit: ') for k in med)} variants measured, "
           f"{lim.removeprefix('limit: ')} at {med[lim][0]:.0f} MiB/s"]
    for name, label, what in (("ours / limit", ours_label, "ours"),
                              ("reference / limit (the server's share of the limit)", ref, "reference")):
        try:
            share = share_of_limit(med[label][0], med[lim][0], what=what, limit_label="limit")
            out.append(f"ratio {name}: {share:.2f}")
        except LimitTooLowError as e:
            out.append(f"ratio {name}: refused: {e}")
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; prints the figures, returns an exit status."""
    ap = argparse.ArgumentParser(prog="loadgen_selftest", description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=1024, help="fixture size, MiB (default 1024)")
    ap.add_argument("--repeats", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--duration", type=float, default=1.5,
                    help="seconds of RETR per variant per round (default 1.5)")
    ap.add_argument("--quick", action="store_true", help="fewer variants")
    ap.add_argument("--cost-rounds", type=int, default=3,
                    help="rounds of the client cost before/after (us/login, s/GiB; 0: skip; default 3)")
    ap.add_argument("--clients", type=int, default=300, help="concurrent logins of the client cost (default 300)")
    a = ap.parse_args(argv)
    size = a.size * MIB

    from runner.catalogue.workloads import WorkloadParams
    from runner.load.ftp.fixtures import server_name, write_fixture
    from runner.selftest.limit import VARIANTS, NetlimitError, build

    home = Path(tempfile.mkdtemp(prefix="xferlab-selftest-"))
    old_aff = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    proc = None
    try:
        print(f"writing {a.size} MiB fixture in {home} ...", flush=True)
        name = server_name(size)
        write_fixture(home / name, size)
        try:
            proc, port = _start_server(home)
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        pinned = "no (1 CPU)"
        pin: tuple[int | None, int | None] = (None, None)
        if old_aff is not None and len(old_aff) >= 2:
            cpus = sorted(old_aff)
            os.sched_setaffinity(proc.pid, {cpus[0]})
            os.sched_setaffinity(0, {cpus[1]})
            pin = (cpus[0], cpus[1])
            pinned = f"server CPU {cpus[0]}, client CPU {cpus[1]}"
        default_buf = WorkloadParams().buffer_size
        variants: list[tuple[str, Callable[[], tuple[float, float]]]] = [
            ("ours: run_workload retr (default)", lambda: ours_workload(port, home, size, a.duration)),
        ]
        try:
            build()
            for v in VARIANTS:
                variants.append((f"reference: C receiver {v.label}", lambda v=v: c_receiver(
                    port, name, size, v, pin[1], a.duration)))
                variants.append((f"limit: C sendfile -> C {v.label}", lambda v=v: c_limit(
                    home / name, v, pin, a.duration)))
        except NetlimitError as e:
            print(f"C receiver and limit skipped: {e}", flush=True)
        variants += [
            ("plain Python recv_into 64 KiB", lambda: reference_read(port, name, size, 64 << 10, a.duration)),
            ("plain Python recv_into 1 MiB", lambda: reference_read(port, name, size, 1 << 20, a.duration)),
        ]
        if not a.quick:
            extra = [("splice", default_buf, None), ("reader", default_buf, None),
                     ("reader", 64 << 10, None), ("reader", 1 << 20, None),
                     ("reader", default_buf, 0), ("protocol", default_buf, 0),
                     ("protocol", default_buf, None), ("recv_into", default_buf, 0)]
            for mode, buf, lowat in extra:
                lw = "RCVLOWAT buf/2" if lowat is None else "no RCVLOWAT"
                variants.append((f"ours: {mode} {buf >> 10} KiB {lw}",
                                 lambda m=mode, b=buf, lo=lowat: ours_session(
                                     port, name, size, b, m, lo, a.duration)))
        print(f"pyftpdlib on 127.0.0.1:{port}, file {a.size} MiB, {a.repeats} rounds x "
              f"{a.duration:g} s per variant, pinning: {pinned}", flush=True)
        results: dict[str, list[tuple[float, float]]] = {v[0]: [] for v in variants}
        for rnd in range(a.repeats):
            for label, fn in variants:
                results[label].append(fn())
            print(f"round {rnd + 1}/{a.repeats} MiB/s: " + ", ".join(
                f"{results[lab][-1][0]:.0f}" for lab, _ in variants), flush=True)
        med = {k: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v),
                   min(x[0] for x in v), max(x[0] for x in v)) for k, v in results.items()}
        w = max(len(k) for k in med)
        print()
        print(f"{'variant':<{w}}  {'median MiB/s':>12}  {'min..max':>13}  {'CPU s/GiB':>9}"
              f"  {'client busy':>11}")
        for k, (mbs, cpu, lo, hi) in med.items():
            # share of wall time the client spent on CPU: (CPU s/GiB) x (GiB/s)
            print(f"{k:<{w}}  {mbs:>12.0f}  {lo:>6.0f}..{hi:<6.0f}  {cpu:>9.3f}"
                  f"  {cpu * mbs / 1024:>10.0%}")
        ours = med["ours: run_workload retr (default)"][0]
        print()
        for line in limit_ratio_lines(med, "ours: run_workload retr (default)"):
            print(line)
        for py in ("plain Python recv_into 64 KiB", "plain Python recv_into 1 MiB"):
            print(f"ratio ours / {py}: {ours / med[py][0]:.2f}")
        print("(noisy: shared 2-core machine; medians of interleaved rounds)")
        if a.cost_rounds > 0:
            from client_cost import client_cost, format_client_cost

            from runner.load.target import Target

            print(f"\nclient cost: {a.cost_rounds} rounds, {a.clients} concurrent logins, RETR {a.duration:g} s, "
                  "STOR 256 MiB (before: asyncio loop, RETR recv_into; after: uvloop, RETR splice)", flush=True)
            cost = client_cost(Target("127.0.0.1", port, USER, PASSWORD, root=home), (name, size),
                               rounds=a.cost_rounds, clients=a.clients, retr_seconds=a.duration,
                               progress=lambda m: print(m, flush=True))
            print("\n".join(format_client_cost(cost, a.clients)))
        return 0
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        if old_aff is not None:
            os.sched_setaffinity(0, old_aff)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
