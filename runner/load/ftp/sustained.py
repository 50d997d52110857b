"""The sustained-load workloads ``retr_sustained`` / ``stor_sustained``
(docs/methodology.md, "Sustained load"): N clients keep transferring a ``file_size`` file
for ``duration`` seconds.

* ``session: per_op``: every operation is a new session: connect, greeting, USER/PASS,
  TYPE I, PASV/EPSV + RETR (or STOR) to the ``226``, QUIT to the server's close
  (dkftpbench's user). ``session: reuse``: each client logs in once before the phase
  (untimed) and loops the transfer on that session; after a failed operation the
  client's next operation logs in again, and that login is part of its time.
* **Closed loop** (``rate`` unset): each client starts its next operation when its last
  one ended, until ``duration`` has passed.
* **Open loop** (``rate: R`` operations/s over all clients): operation k is *due* at
  ``t0 + k / R``; the next free client takes the next due operation (sleeping until it is
  due). When every client is busy, the operation waits, and its wait is part of its
  latency: each operation's latency counts from its *intended* start, not from when a
  client got to it (the coordinated-omission correction of wrk2, G. Tene). Operations due
  before ``duration`` are all run; those not started by ``2 x duration`` (the server fell
  so far behind that the backlog would take longer to drain than the phase) are counted as
  errors of kind ``backlog``.

Figures (runner.load.result.PhaseResult): ``elapsed_s`` from the phase start to the
last operation's end; ``ops`` and ``bytes`` of completed operations (STOR: bytes the
server confirmed with ``226``, and after the phase the size of each client's last file is
checked with SIZE on a fresh session, untimed, and the files are deleted; the session that
placed the RETR fixture is closed before the phase, so no session idles through it);
errors by kind (runner.load.ftp.replies); ``histograms``: ``latency`` (from the intended
start: corrected) and ``service`` (from the actual start) in HDR histograms
(runner.load.hdr), failed operations in neither; ``clients``: per
client its confirmed bytes, the span from its first operation's start to its last one's
end, and whether all its operations succeeded (the fairness figures and "users at rate R",
``user_rate``, use them).
"""
from __future__ import annotations

import asyncio
import math
import os
import time
from contextlib import ExitStack
from typing import BinaryIO

from runner.load import hdr
from runner.load.ftp.fixtures import client_source, ensure_server_file
from runner.load.ftp.phase import MAX_REPEATS, ClientSpan, Phase
from runner.load.ftp.session import FTPError, FTPSession, _with_timeout
from runner.load.result import LATE_SESSION_S

#: Open loop: operations due before ``duration`` but not started before this many
#: ``duration``s after the phase start are counted as ``backlog`` errors.
DRAIN_FACTOR = 2.0


class _Client(ClientSpan):
    """One client's state and figures."""

    __slots__ = ("name", "session", "ops")

    def __init__(self, name: str, session: FTPSession | None) -> None:
        super().__init__()
        self.name = name          # STOR: the file this client writes
        self.session = session    # reuse: its logged-in session (None: log in at the next operation)
        self.ops = 0


class _Loop:
    """The measured loop of one sustained phase."""

    def __init__(self, ph: Phase, direction: str, retr_name: str, source: BinaryIO | None,
                 clients: list[_Client]) -> None:
        self.ph = ph
        self.direction = direction
        self.retr_name = retr_name
        self.source = source
        self.clients = clients
        self.latency = hdr.new_histogram()
        self.service = hdr.new_histogram()
        self.next_slot = 0
        self.unstarted = 0

    async def _login(self) -> FTPSession:
        ph = self.ph
        t = ph.target
        s = FTPSession(t.host, t.port, **ph.kw())
        ph.sessions.add(s)
        t0 = time.perf_counter()
        try:
            await s.connect()
            ph.greeted += 1
            if time.perf_counter() - t0 > LATE_SESSION_S:
                ph.late += 1
            await s.login(t.user, t.password)
            ph.logged_in += 1
            await s.type_binary()
        except BaseException:
            s.close()
            ph.sessions.discard(s)
            raise
        return s

    async def _transfer(self, s: FTPSession, c: _Client) -> int:
        size = self.ph.p.file_size
        if self.source is None:
            return await s.retr(self.retr_name, size)
        return await _with_timeout(s.stor_transfer(c.name, self.source, size), self.ph.p.op_timeout,
                                   f"STOR {c.name}")

    async def _operation(self, c: _Client) -> int:
        """One operation of client ``c``; returns its confirmed bytes or raises FTPError."""
        ph = self.ph
        if ph.p.session == "reuse":
            if c.session is None:
                c.session = await self._login()
            try:
                return await self._transfer(c.session, c)
            except BaseException:
                c.session.close()
                ph.sessions.discard(c.session)
                c.session = None
                raise
        s = await self._login()
        try:
            n = await self._transfer(s, c)
            await s.quit()
            return n
        finally:
            s.close()
            ph.sessions.discard(s)

    async def client(self, c: _Client, t0: float) -> None:
        ph = self.ph
        p = ph.p
        stop = t0 + p.duration
        drain = t0 + DRAIN_FACTOR * p.duration
        for _ in range(MAX_REPEATS):
            now = time.perf_counter()
            if p.rate is None:
                if now >= stop:
                    return
                intended = now
            else:
                intended = t0 + self.next_slot / p.rate
                if intended >= stop or now >= drain:
                    return
                self.next_slot += 1
                for _ in range(1000):  # a timer may fire early (uvloop's resolution is 1 ms): sleep again
                    wait = intended - time.perf_counter()
                    if wait <= 0:
                        break
                    await asyncio.sleep(wait)
            start = intended if p.rate is None else time.perf_counter()
            if c.first is None:
                c.first = start
            ph.pending += 1  # left counted when the phase timeout cancels it: a ``timeout`` error
            try:
                n = await self._operation(c)
            except FTPError as e:
                ph.pending -= 1
                ph.error(e)
                c.ok = False
                c.last = time.perf_counter()
                continue
            ph.pending -= 1
            end = c.last = time.perf_counter()
            c.bytes += n
            c.ops += 1
            ph.bytes += n
            ph.ops += 1
            hdr.record_s(self.latency, end - intended)
            hdr.record_s(self.service, end - start)

    async def run(self) -> None:
        ph = self.ph
        ph.begin()
        t0 = ph.t0
        assert t0 is not None  # set by begin()
        try:
            await asyncio.gather(*(self.client(c, t0) for c in self.clients))
        finally:
            ends = [c.last for c in self.clients if c.last is not None]
            ph.t1 = max(ends) if ends and ph.pending == 0 else time.perf_counter()
            ph.clients = [c.figures() for c in self.clients]
            ph.histograms = {"latency": hdr.encode(self.latency), "service": hdr.encode(self.service)}
            ph.end()
        rate = ph.p.rate
        if rate is not None:
            due = math.ceil(ph.p.duration * rate)
            self.unstarted = max(0, due - self.next_slot)
            if self.unstarted:
                ph.errors["backlog"] += self.unstarted
                ph.first_error.setdefault("backlog", f"{self.unstarted} of {due} operations due in the open loop "
                                                     f"were not started within {DRAIN_FACTOR:g} x duration")


async def run_sustained(ph: Phase, direction: str) -> None:
    """The phase of ``retr_sustained`` (``direction="retr"``) or ``stor_sustained``
    (``"stor"``) on ``ph`` (module docstring). Errors are counted in ``ph``, never raised;
    a server that admits no setup session leaves ``ph`` without a login (runner.load.ftp.workloads
    then raises LoadError)."""
    p = ph.p
    n = p.clients
    loop_kind = f"open loop, target {p.rate:g} operations/s" if p.rate else "closed loop"
    ph.notes.append(f"sustained: {n} clients, {loop_kind}, session {p.session}, {p.duration:g} s")
    setup, _ = await ph.login_one(binary=True)
    if setup is None:
        return
    size = p.file_size
    with ExitStack() as stack:
        if direction == "retr":
            try:
                retr_name = await ensure_server_file(setup if ph.target.root is None else None, ph.target.root,
                                                     size, ph.progress)
            except FTPError as e:
                ph.error(e)
                ph.notes.append("setup: cannot place the RETR fixture")
                await ph.teardown([setup])
                return
            source = None
        else:
            retr_name = ""
            source = stack.enter_context(open(client_source(size, ph.progress), "rb"))
        # the setup session would sit idle through the phase (a server may time it out): QUIT it now
        await _quit_quietly(ph, setup)
        names = [f"xferlab-sust-{os.getpid()}-{i}.bin" for i in range(n)]
        clients = [_Client(names[i], None) for i in range(n)]
        if p.session == "reuse":
            ph.progress(f"logging in {n} sessions ({p.login_mode})")
            sessions = await ph.login_many(n, binary=True, measured=False)
            if len(sessions) < n:
                ph.notes.append(f"setup: {n - len(sessions)} of {n} sessions failed to log in; "
                                "those clients log in at their first operation")
            for c, s in zip(clients, sessions):
                c.session = s
            ph.checkpoint("loaded")
        ph.progress(f"{direction.upper()} {size} bytes, {n} clients, {loop_kind}, {p.duration:g} s")
        loop = _Loop(ph, direction, retr_name, source, clients)
        await loop.run()
        achieved = ph.ops / ph.elapsed_s() if ph.elapsed_s() > 0 else 0.0
        ph.progress(f"{ph.ops} operations in {ph.elapsed_s():.3f} s ({achieved:,.1f}/s), "
                    f"{ph.bytes / (1 << 20) / ph.elapsed_s() if ph.elapsed_s() else 0:,.1f} MiB/s")
        if p.rate is not None:
            ph.notes.append(f"open loop: {achieved:,.1f} operations/s achieved of {p.rate:g}/s")
        live = [c.session for c in clients if c.session is not None]
        if source is not None:  # untimed, on a fresh session: check the files, then delete them
            check, _ = await ph.login_one(binary=True)
            if check is None:
                ph.notes.append("teardown: no session to check and delete the STOR files")
            else:
                await _verify_stor(ph, check, clients, size)
                live.insert(0, check)
    await ph.teardown(live, names if direction == "stor" else ())


async def _quit_quietly(ph: Phase, s: FTPSession) -> None:
    """QUIT ``s`` (untimed, bounded by ``op_timeout``; a failure only closes it)."""
    try:
        await s.quit()
    except FTPError:
        pass
    finally:
        s.close()
        ph.sessions.discard(s)


async def _verify_stor(ph: Phase, check: FTPSession, clients: list[_Client], size: int) -> None:
    """Untimed: each client's last file must be ``size`` bytes on the server (SIZE)."""
    for c in clients:
        if not c.ops:
            continue
        try:
            await check.verify_size(c.name, size)
        except FTPError as e:
            ph.error(e)
            c.ok = False
    ph.clients = [c.figures() for c in clients]
