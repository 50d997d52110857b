"""The lab's RETR and STOR throughput checked against independent clients on the same running
server, in the same test: curl, and the C client of ``runner/selftest/netlimit.c``.

Each test starts one server with the local backend (variant ``storage: tmpfs``, so STOR
measures the network and the server, not the disk) on CPU :data:`SERVER_CPU`, and runs
:data:`ROUNDS` rounds on it after one unjudged warm-up round (and :data:`MORE_ROUNDS` more,
a step at a time, while a ratio lies outside its band). Each round runs, one after
another on CPU :data:`CLIENT_CPU`: the lab's own client (``xferlab loadgen``, the process a
campaign runs per client, the ``xferlab-ftp`` driver, one session, a :data:`SIZE` file
repeated for :data:`ROUND_S` s), the C client, a C client that copies as curl does, and
curl. Interleaving lets a change in the rest of the machine hit every client alike; the
median over the rounds of each ratio is judged.

CPU isolation: with ``kernel.sched_autogroup_enabled=1`` a process's nice value only
weighs against its own session's tasks (sched(7), "The autogroup feature"), so on a shared
machine a per-process ``nice`` barely changes its CPU share. As root, the server and every
client run in a session of their own with autogroup nice :data:`NICE`: equal weights, above
the rest of the machine. The lab's client runs on asyncio's loop (uvloop would resolve the
data connection's numeric address on its thread pool: more threads to wait on the CPU).

Timing: the lab times each transfer from its PASV/EPSV to its 226 (runner/load/ftp/
workloads.py), the C client from RETR/STOR to EOF/2xx, curl the second of two transfers on
one control connection (its ``time_total``: from the reuse of the connection through
EPSV/TYPE/SIZE/RETR to the 226). The few command round trips apart are about 0.1 ms on
loopback against a 256 MiB transfer of 60 to 300 ms: below 1%.
"""
from __future__ import annotations

import ftplib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.load.ftp.fixtures import client_source, server_name
from runner.load.ftp.retr import SPLICE_PIPE
from runner.load.target import Target
from runner.multihost.loadgen import loadgen_args, result_from_json
from runner.selftest import limit
from tests.runner.support import driver_or_skip, start_or_skip
from tests.support.skips import lacks_if

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600),
              lacks_if((os.cpu_count() or 1) < 2 or len(os.sched_getaffinity(0)) < 2,
                       "a second CPU (server and clients apart)")]

MIB = 1 << 20
#: Bytes per transfer.
SIZE = 256 * MIB
#: Judged rounds per test (after one unjudged warm-up round); the median ratio of the rounds
#: is judged. Twelve: a CI run's 8 rounds to tpd had two in which the lab alone read less than
#: half its usual rate (702 and 781 MiB/s against 1,235-1,783; the C uploader 1,773 and 1,457
#: in the same rounds), which moved the median of 8 to 0.89: it lay between the 2nd and 3rd
#: ratio of the six other rounds; of 12, two such rounds leave it between the 4th and 5th of
#: the ten others.
ROUNDS = 12
#: Judged rounds added, one step at a time, while a ratio of the rounds so far lies outside
#: its band (12, then 24 and 24 + 48 more: 96 at most); each verdict is that of all the
#: rounds so far. On this 2-core VM one transfer's figure varies by 15-40% from round to
#: round (the lab's tpd STOR rounds 733-1,305 MiB/s in one whole suite run, with the
#: run-queue wait and CPU pressure low in every round: the virtual CPU's own speed varies,
#: a fixed shell loop pinned to one CPU used 0.29-0.48 s of user CPU in 48 runs;
#: docs/methodology.md), so the median of n per-round ratios has a standard error of about
#: 0.3 / sqrt(n): 0.09 at 12 rounds, 0.06 at 24, 0.03 at 96, against a band edge 0.1
#: from 1. Two CI runs failed at 24 rounds on a ratio whose rounds spread 0.79-1.70
#: (pyftpdlib, lab / C sendfile 1.150) and 0.81-1.18 (tpd, 0.906 and its quotient);
#: each step shrinks the error of a verdict near the edge before it fails. A lab off by
#: 15% fails at 96 rounds (its median then lies about 1.7 standard errors outside the
#: band), though a look before may pass it by chance (at 12 rounds, about 30%, as before
#: the steps were added).
MORE_ROUNDS = (12, 24, 48)
#: Seconds each round's lab client and C client download for (at least one transfer each).
ROUND_S = 0.3
#: Seconds each round's lab client and C client upload for: one upload each (to a new name).
STOR_S = 0.01
#: The lab's figure / a reference's, median over the rounds, must lie in this band.
BAND = (0.9, 1.1)
#: curl's figure / the C client that copies as curl does: a wider band, for curl's own
#: spread (one CI run's STOR rounds on tpd: curl 1,199-1,622 MiB/s against the C copy's
#: 1,585-1,728, a median ratio of 0.874); the lab's own figure keeps :data:`BAND`.
CURL_BAND = (0.85, 1.15)
#: curl's receive buffer (the curl tool's default, seen with strace: ``recvfrom(fd, ..., 102400, ...)``).
CURL_BUF = 100 * 1024
#: Most bytes libcurl hands its write callback at once (``CURL_MAX_WRITE_SIZE``).
CURL_WRITE_PIECE = 16 * 1024
#: curl's upload buffer (``CURLOPT_UPLOAD_BUFFERSIZE`` default; ``curl -v``: "[65536 bytes data]").
CURL_UPLOAD_BUF = 64 * 1024
#: Most seconds one curl or loadgen process may take.
PROC_TIMEOUT_S = 60
SERVER_CPU, CLIENT_CPU = sorted(os.sched_getaffinity(0))[:2] if len(os.sched_getaffinity(0)) >= 2 else (0, 1)
#: The autogroup (and process) nice value of the server and of each client, as root.
NICE = -19
REPO = Path(__file__).resolve().parents[3]


def _boost() -> None:
    """In a child (preexec_fn, after ``start_new_session``): on :data:`CLIENT_CPU`; as root
    nice :data:`NICE` for the process and its new autogroup."""
    os.sched_setaffinity(0, {CLIENT_CPU})
    if os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
        Path("/proc/self/autogroup").write_text(str(NICE))


def _boosted_netlimit(tmp: Path) -> Path:
    """A wrapper for the netlimit binary (``binary=`` of runner.selftest.limit) that runs
    it in a session of its own with autogroup nice :data:`NICE` (as root)."""
    exe = limit.build()
    w = tmp / "netlimit-boosted"
    boost = f"echo {NICE} > /proc/self/autogroup; renice -n {NICE} -p $$ >/dev/null; " if os.geteuid() == 0 else ""
    w.write_text(f"#!/bin/sh\nexec setsid -w sh -c '{boost}exec \"$0\" \"$@\"' {exe} \"$@\"\n")
    w.chmod(0o755)
    return w


def _lab(t: Target, workload: str, duration: float, waits: list[str] | None = None) -> float:
    """The lab's throughput, MiB/s: one ``xferlab loadgen`` phase of ``workload`` (one
    session, :data:`SIZE` bytes per transfer for ``duration`` s) on :data:`CLIENT_CPU`.
    ``waits`` gets, per call, the phase's run-queue wait of the lab's client and the
    machine's CPU pressure (ms, runner.metrics.runqueue), printed with the figures: what
    a slow round waited for."""
    params = WorkloadParams(transfer_size=SIZE, duration=duration, phase_timeout=PROC_TIMEOUT_S)
    args = loadgen_args(workload, {"host": t.host, "port": t.port, "user": t.user, "password": t.password},
                        params, start_at=time.time(), name="client", cpu=[CLIENT_CPU])
    env = dict(os.environ, XFERLAB_EVENT_LOOP="asyncio", PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "runner.cli", *args], capture_output=True, text=True,
                       timeout=PROC_TIMEOUT_S + 30, env=env, cwd=REPO, start_new_session=True, preexec_fn=_boost)
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines, f"loadgen exited {p.returncode}: {p.stdout[-1000:]} {p.stderr[-2000:]}"
    r = result_from_json(json.loads(lines[-1])["result"])
    assert r.error_count == 0 and r.ops >= 1 and r.bytes == r.ops * SIZE, (r.errors, r.notes)
    if waits is not None:
        ms = [f"{v * 1000:.0f}" if v is not None else "-" for v in (r.client_runqueue_wait_s, r.cpu_pressure_s)]
        waits.append("/".join(ms))
    return r.throughput_mib_s


def _curl(t: Target, *, upload: Path | None = None, name: str) -> float:
    """curl's throughput of one transfer, MiB/s, from curl's own clock: one curl process
    transfers the file twice on one control connection; the second transfer's
    ``time_total`` is taken (the login belongs to the first). Uploads go to ``name`` and
    then ``name`` + ``.2``, so the timed one creates a new file."""
    url = f"ftp://{t.user}:{t.password}@127.0.0.1:{t.port}/{name}"
    what = "%{size_upload}" if upload else "%{size_download}"
    one = ["-T", str(upload)] if upload else ["-o", "/dev/null"]
    argv = ["curl", "-s", "-S", "--max-time", str(PROC_TIMEOUT_S), "-w", f"{what} %{{time_total}}\\n",
            *one, url, *one, url + (".2" if upload else "")]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=PROC_TIMEOUT_S + 10,
                       start_new_session=True, preexec_fn=_boost)
    assert p.returncode == 0, (p.returncode, p.stderr)
    lines = p.stdout.split("\n")
    n, total = lines[1].split()
    assert int(float(lines[0].split()[0])) == int(float(n)) == SIZE, p.stdout
    return SIZE / float(total) / MIB


def _ratio(rounds: list[dict[str, float]], a: str, b: str) -> float:
    return statistics.median(r[a] / r[b] for r in rounds)


def _show(rounds: list[dict[str, float]]) -> str:
    keys = list(rounds[0])
    return "MiB/s per round (" + " / ".join(keys) + "): " + "; ".join(
        " / ".join(f"{r[k]:.0f}" for k in keys) for r in rounds)


@pytest.fixture
def served(request) -> Iterator[Target]:  # noqa: ANN001
    """The parametrized server, started by the local backend on :data:`SERVER_CPU` (tmpfs
    storage), in its own session with autogroup nice :data:`NICE` as root; stopped after."""
    from runner.backends import get_backend
    from runner.spec.request import ServerRequest

    driver_or_skip("xferlab-ftp")
    driver_or_skip("curl")
    handle = start_or_skip(get_backend("local"), ServerRequest(request.param, variant={"storage": "tmpfs"}),
                           cpu=[SERVER_CPU])
    try:
        if os.geteuid() == 0:
            assert Path(f"/proc/{handle.pid}/autogroup").read_text() != Path("/proc/self/autogroup").read_text()
            Path(f"/proc/{handle.pid}/autogroup").write_text(str(NICE))
        yield handle.target
    finally:
        handle.stop()


def _measure(rounds_n: int, one: dict[str, Callable[[], float]],
             after: Callable[[], None] = lambda: None, warm_up: bool = True) -> list[dict[str, float]]:
    """``rounds_n`` rounds (after one unjudged warm-up round unless ``warm_up`` is false)
    of the callables in ``one``, each round followed by ``after()`` (untimed). Round i
    starts at the i-th callable (a rotation), so that no client always follows the same one."""
    rounds = []
    keys = list(one)
    first = 0 if warm_up else 1
    for i in range(first, rounds_n + 1):
        order = keys[i % len(keys):] + keys[:i % len(keys)]
        got = {k: one[k]() for k in order}
        r = {k: got[k] for k in keys}
        after()
        if i:
            rounds.append(r)
    return rounds


def _judge(rounds: list[dict[str, float]], lab_ref: str, curl_ref: str, also: str = "",
           judge_curl: bool = True) -> tuple[list[str], str]:
    """The two same-technique ratios judged (the lab / ``lab_ref`` in :data:`BAND`, curl /
    ``curl_ref`` in :data:`CURL_BAND`; the latter printed, not judged, when ``judge_curl``
    is false): the ones outside their band (as messages; empty when all judged are in),
    and the lines of figures printed (``also`` is printed after them).

    The lab against curl is judged through those two: the lab and ``lab_ref`` use one
    technique, curl and ``curl_ref`` the other, all four on one server in the same rounds,
    so lab / curl is (lab / ``lab_ref``) / (curl / ``curl_ref``) times the cost of the two
    techniques, ``lab_ref`` / ``curl_ref``. That same-round quotient is printed with the
    band the two bands put it in (0.78-1.29), not judged on its own: when the two judged
    ratios lie near opposite edges of their bands, the median of their per-round quotient
    lies near the edge of its band and outside it from noise alone (a CI run's tpd STOR:
    lab / C sendfile 0.906, curl / C copy 1.140, both in; the median quotient 0.774 against
    0.783). A median of lab / curl alone would not do either: in one CI run curl and the C
    copy each read either about 1,550-2,000 or about 2,400-2,700 MiB/s from round to
    round, so the median of lab / curl (0.744) and that of C sendfile / C copy (0.594) came
    from different rounds, while the same-round figure was 1.01."""
    lab_c, curl_c = _ratio(rounds, "lab", lab_ref), _ratio(rounds, "curl", curl_ref)
    cost, lab_curl = _ratio(rounds, lab_ref, curl_ref), _ratio(rounds, "lab", "curl")
    paired = statistics.median(r["lab"] / r["curl"] / (r[lab_ref] / r[curl_ref]) for r in rounds)
    band = (BAND[0] / CURL_BAND[1], BAND[1] / CURL_BAND[0])
    shown = (f"{_show(rounds)}\n  lab/{lab_ref} {lab_c:.3f}, curl/{curl_ref} {curl_c:.3f}, "
             f"{lab_ref}/{curl_ref} {cost:.3f}, lab/curl {lab_curl:.3f}; "
             f"(lab/curl) / ({lab_ref}/{curl_ref}) in the same round {paired:.3f} (band {band[0]:.3f}-{band[1]:.3f})"
             + (f"\n  {also}" if also else ""))
    print(f"\n{len(rounds)} rounds: {shown}")
    out = []
    if not BAND[0] <= lab_c <= BAND[1]:
        out.append(f"lab / {lab_ref} = {lab_c:.3f}")
    if judge_curl and not CURL_BAND[0] <= curl_c <= CURL_BAND[1]:
        out.append(f"curl / {curl_ref} = {curl_c:.3f}")
    return out, shown


def _judge_rounds(measure: Callable[[int, bool], list[dict[str, float]]], lab_ref: str, curl_ref: str,
                  also: Callable[[], str], judge_curl: bool = True) -> None:
    """Assert the ratios of :func:`_judge` over ``measure(ROUNDS, True)``; while one lies
    outside its band, over those and ``measure(k, False)`` for the next ``k`` of
    :data:`MORE_ROUNDS`, all together."""
    rounds = measure(ROUNDS, True)
    out, shown = _judge(rounds, lab_ref, curl_ref, also(), judge_curl)
    for more in MORE_ROUNDS:
        if not out:
            break
        print(f"outside the band after {len(rounds)} rounds ({'; '.join(out)}): {more} more")
        rounds += measure(more, False)
        out, shown = _judge(rounds, lab_ref, curl_ref, also(), judge_curl)
    assert not out, f"{'; '.join(out)} over {len(rounds)} rounds; {shown}"


def test_rounds_are_added_a_step_at_a_time_while_a_ratio_is_outside():
    """The verdict's steps without a server: rounds whose lab / C ratio is 1.2 fail after
    12 + 12 + 24 + 48 rounds; rounds at 1.3 for the first 12 and 1.0 after pass at the
    look that brings the median inside (24 rounds: 1.15, outside; 48: 1.0)."""
    def measure_with(first: float, rest: float, asked: list[int]):
        def measure(n: int, warm_up: bool) -> list[dict[str, float]]:
            asked.append(n)
            ratio = first if not asked[:-1] else rest
            return [{"lab": ratio, "C": 1.0, "C copy": 1.0, "curl": 1.0}] * n
        return measure

    asked: list[int] = []
    with pytest.raises(AssertionError, match="lab / C = 1.200 over 96 rounds"):
        _judge_rounds(measure_with(1.2, 1.2, asked), "C", "C copy", lambda: "")
    assert asked == [ROUNDS, *MORE_ROUNDS]
    asked = []
    _judge_rounds(measure_with(1.3, 1.0, asked), "C", "C copy", lambda: "")
    assert asked == [ROUNDS, 12, 24]


@pytest.mark.parametrize("served", ["tpd", "pyftpdlib"], indirect=True)
def test_retr_matches_the_c_receiver_and_curl(served, tmp_path, request):
    """RETR: the lab's client reads with splice(2) socket -> pipe -> /dev/null and
    SO_RCVLOWAT (runner/load/ftp/retr.py): no copy to user space, a wake-up per half pipe.
    The C receiver in ``splice`` mode with the same 1 MiB pipe and 512 KiB low-water mark
    (``C splice``) must match it within 10%.

    curl waits in poll(2) and recv()s into its 100 KiB buffer from the non-blocking socket,
    then fwrite()s each 16 KiB piece to /dev/null (strace of a 64 MiB RETR from
    pyftpdlib: 725 ``poll``, 694 ``recvfrom(fd, ..., 102400, ...)``, 8,485 ``write``): a
    copy to user space per byte and a poll per read. The C receiver doing the same
    (``recv`` mode, 100 KiB buffer, ``--write-piece 16384``, and ``--rcvlowat 1``: a
    non-blocking socket and a wait in poll, the kernel's default low-water mark: ``C
    copy``) must match curl within 15% (:data:`CURL_BAND`). With blocking reads instead,
    the C copy read 3,542 MiB/s from pyftpdlib (median of 10 interleaved rounds) against
    3,040 waiting in poll and curl's 3,251 (curl / blocking C copy 0.90, curl / polling
    C copy 1.00; 0.830-0.867 in the two test runs before this change). lab / curl is
    printed beside C splice / C copy of the same round (:func:`_judge`).

    curl / C copy is judged on tpd only. pyftpdlib is bound by its own CPU here (C splice /
    C copy 1.0-1.4 from it against 2.1-2.2 from tpd, whose rate the receiver's copy sets),
    and then a receiver's wake-up pattern paces the server: curl / C copy from pyftpdlib
    read 0.830-0.867 with the C copy's blocking reads and 1.090-1.169 with its reads
    after poll (two test runs each, 12-24 rounds), both at the band's edges; it is
    printed there."""
    t = served
    served_name = request.node.callspec.params["served"]
    nl = _boosted_netlimit(tmp_path)
    name = server_name(SIZE)

    def c(receiver: limit.Receiver, bufsize: int, rcvlowat: int, piece: int) -> float:
        return limit.measure_ftp_retr(t.port, t.user, t.password, name, ROUND_S, size=SIZE, receiver=receiver,
                                      bufsize=bufsize, rcvlowat=rcvlowat, write_piece=piece, cpu=CLIENT_CPU,
                                      binary=nl).mib_s

    waits: list[str] = []
    clients = {"lab": lambda: _lab(t, "retr", ROUND_S, waits),
               "C splice": lambda: c("splice", SPLICE_PIPE, SPLICE_PIPE // 2, 0),
               "C copy": lambda: c("recv", CURL_BUF, 1, CURL_WRITE_PIECE),
               "curl": lambda: _curl(t, name=name)}
    _judge_rounds(lambda n, warm_up: _measure(n, clients, warm_up=warm_up), "C splice", "C copy",
                  lambda: "the lab's run-queue wait / the machine's CPU pressure per round, ms: "
                  + "; ".join(waits[1:]), judge_curl=served_name == "tpd")


@pytest.mark.parametrize("served", ["tpd", "pyftpdlib"], indirect=True)
def test_stor_matches_the_c_uploader_and_curl(served, tmp_path):
    """STOR: the lab's client sends the file with sendfile(2), as the C uploader does
    (``C sendfile``): the two must match within 10%.

    curl read()s the file into its 64 KiB upload buffer and send()s it, a copy per byte;
    the C uploader doing the same (``--send-piece 65536``: ``C copy``) must match curl
    within 15% (:data:`CURL_BAND`); lab / curl is printed beside the C sendfile / C copy of
    the same round (:func:`_judge`).
    That ratio is below 1 on a server bound by its own CPU: the server's receive costs it
    more kernel time per byte when the sender used sendfile (its socket then holds the
    file's 4 KiB page-cache pages instead of the sender's freshly copied buffers):
    pyftpdlib used 1.03 s of CPU for 768 MiB from a sendfile uploader and 0.59 s from a
    copying one (/proc/PID/stat), and took 714-718 MiB/s against 1150-1159 MiB/s."""
    t = served
    nl = _boosted_netlimit(tmp_path)
    src = client_source(SIZE)

    names = ["netlimit-sendfile.bin", "netlimit-copy.bin", "curl-stor.bin", "curl-stor.bin.2"]

    def c(piece: int) -> float:
        return limit.measure_ftp_stor(t.port, t.user, t.password, names[1 if piece else 0], src, STOR_S,
                                      cpu=CLIENT_CPU, send_piece=piece, binary=nl).mib_s

    def delete() -> None:
        with ftplib.FTP() as f:
            f.connect("127.0.0.1", t.port, timeout=30)
            f.login(t.user, t.password)
            for n in names:
                f.delete(n)

    waits: list[str] = []
    clients = {"lab": lambda: _lab(t, "stor", STOR_S, waits), "C sendfile": lambda: c(0),
               "C copy": lambda: c(CURL_UPLOAD_BUF), "curl": lambda: _curl(t, upload=src, name=names[2])}
    _judge_rounds(lambda n, warm_up: _measure(n, clients, delete, warm_up), "C sendfile", "C copy",
                  lambda: "the lab's run-queue wait / the machine's CPU pressure per round, ms: "
                  + "; ".join(waits[1:]))
