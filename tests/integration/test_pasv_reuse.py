"""Passive ports left in TIME_WAIT, against every FTP server the
lab can run here, started by the lab's own local backend.

A server that closes the data connection first (all of them do after RETR) leaves
the connection's server side in TIME_WAIT for 60 s.  If the server binds its next
passive listener without SO_REUSEADDR, a port with a TIME_WAIT connection cannot be
bound again, so short transfers use up a passive range at the rate they run and
users get ``425``.  Each server gets a 100-port passive range and one session runs 500
short RETRs (a 16-byte file) through the lab's load-generator client
(runner.load.ftp.session.FTPSession): more transfers than ports, five per port, and the
test asserts that the whole session ends within one TIME_WAIT period (500 RETRs take
about 1 to 21 s here), so every reuse of a port happens while its previous connection is
in TIME_WAIT. A server that hands out its range in turn reuses each port four times that
way; one that picks at random repeats a port within about a dozen transfers (birthday
bound over 100 ports).

The lab counts 425 replies under their own error kind (``reply_425``); the test
asserts there are none, and prints the counts per server.

Twisted's RETRs are the slowest: each takes about 42 ms here, all of it between the end
of the data and the ``226`` reply. Twisted's control connection runs without
TCP_NODELAY, so Nagle's algorithm holds the small ``226`` segment until the client
ACKs the ``150`` before it, and the client delays that ACK (Linux's delayed ACK,
about 40 ms). Measured: 226 after 42.05 ms median; with TCP_QUICKACK set on the
client's control socket, 0.06 ms. Its 500 RETRs take about 21 s, still inside one
TIME_WAIT period.

Bounded: the transfers and SERVER_BUDGET_S seconds per server, whichever first.
"""
from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from runner.backends.local import LocalBackend
from runner.load.ftp.replies import reply_error as _reply_error
from runner.load.ftp.session import FTPError, FTPSession, Reply, classify
from runner.spec.request import ServerRequest
from tests.runner.support import start_or_skip
from tests.support.ports import free_range

pytestmark = [pytest.mark.integration, pytest.mark.timeout(2400)]

RETRS = 500
#: passive ports per server: RETRS / PASV_WIDTH = 5 transfers per port within one TIME_WAIT period
PASV_WIDTH = 100
#: Linux's TIME_WAIT length (TCP_TIMEWAIT_LEN, include/net/tcp.h), seconds
TIME_WAIT_S = 60.0
SERVER_BUDGET_S = 120.0
TINY = b"xferlab pasv 425"

#: (name, version) as the backend tests name them
SERVERS = [("pyftpdlib", "2.2.0"), ("twisted", "24.11.0"), ("vsftpd", None),
           ("proftpd", None), ("pureftpd", None), ("tpd", None)]


def test_425_has_its_own_error_kind():
    e = _reply_error(Reply(425, "425 Could not open passive port."), "RETR x")
    assert e.kind == "reply_425" and classify(e) == "reply_425" and e.code == 425
    assert _reply_error(Reply(421, "421 Timeout."), "RETR x").kind == "reply_4xx"
    assert _reply_error(Reply(550, "550 No."), "RETR x").kind == "reply_5xx"


async def _many_retrs(host: str, port: int, user: str, password: str,
                      src, retrs: int = RETRS) -> tuple[Counter, float]:
    """One session: STOR the tiny file, then up to ``retrs`` RETRs of it within the
    budget. Returns (outcome counts, seconds)."""
    counts: Counter = Counter()
    t0 = time.monotonic()
    async with FTPSession(host, port, op_timeout=15) as s:
        await s.connect()
        await s.login(user, password)
        await s.type_binary()
        with open(src, "rb") as f:
            await s.stor("tiny.bin", f, len(TINY))
        for _ in range(retrs):
            if time.monotonic() - t0 > SERVER_BUDGET_S:
                counts["unfinished (budget)"] += retrs - sum(counts.values())
                break
            try:
                await s.retr("tiny.bin", len(TINY))
                counts["ok"] += 1
            except FTPError as e:
                counts[e.kind] += 1
                if e.kind in ("reset", "timeout", "protocol"):
                    break                       # the session is unusable
    return counts, time.monotonic() - t0


@pytest.mark.parametrize("name,version", SERVERS, ids=[s[0] for s in SERVERS])
def test_500_short_retrs_over_100_ports_in_one_session(name, version, tmp_path):
    backend = LocalBackend(progress=lambda m: print(f"[xferlab] {m}"))
    retrs, width = RETRS, PASV_WIDTH
    lo = free_range(width)[0]
    req = ServerRequest(name, version, variant={"pasv_ports": f"{lo}-{lo + width - 1}"})
    h = start_or_skip(backend, req)
    try:
        t = h.target
        src = tmp_path / "tiny.bin"
        src.write_bytes(TINY)
        counts, secs = asyncio.run(_many_retrs(t.host, t.port, t.user, t.password, src, retrs))
    finally:
        h.stop()
    print(f"{name}: {dict(counts)} in {secs:.1f} s")
    assert counts["ok"] + counts["reply_425"] == retrs, dict(counts)
    assert counts["reply_425"] == 0, (
        f"{name} ran out of passive ports: {dict(counts)} (425 after "
        f"{counts['ok']} transfers through {width} ports)")
    assert secs < TIME_WAIT_S, (f"{name}: {retrs} RETRs took {secs:.1f} s, longer than one TIME_WAIT "
                                f"period: a port's earlier connection may have left TIME_WAIT before its reuse")
