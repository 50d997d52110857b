"""Logged-in FTP control sessions kept across the cells of one server life.

A row whose workload holds N logged-in sessions that are not themselves what it measures
(the idle sessions of ``stor_idle`` / ``retr_idle``, the sessions over which
``retr_concurrent`` / ``stor_concurrent`` run their transfers: :data:`POOLED_WORKLOADS`)
takes them from a :class:`SessionPool` that outlives its phase: the cell runner
(runner.cell.local) makes one per server life (runner.cell.server_reuse), logs in the
missing sessions before the phase's server CPU is read (:meth:`SessionPool.fill`, through
runner.load.ftp.workloads.fill_sync), the
phase takes them (:meth:`SessionPool.take`) and hands the healthy ones back
(:meth:`SessionPool.put`) instead of ending them, and the pool ends them all when the
server stops (:meth:`SessionPool.close`).

Sessions are asyncio objects bound to one event loop, so a pool runs its phases on an
event loop of its own (:func:`runner.load.loop.loop_factory`: uvloop unless
``XFERLAB_EVENT_LOOP=asyncio``) in a thread that lives as long as the pool, in the
target's network namespace when it has one (runner.net.netns). Each kept session is
asked ``NOOP`` before it is used again (bounded by :data:`PROBE_TIMEOUT`); one that
does not answer ``200`` (it errored, the server ended it or restarted) is closed and
replaced by a fresh login. The rule and why the figures are unchanged:
docs/methodology.md, "Server reuse".
"""
from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from runner.load.ftp.session import FTPError, FTPSession
from runner.load.target import Target

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Workloads whose sessions a pool keeps: their N sessions are set up before what is
#: measured (idle, or the carriers of one concurrent transfer each). ``login`` measures
#: the logins and ``quit`` ends its sessions, so both keep logging in their own.
POOLED_WORKLOADS: frozenset[str] = frozenset({"stor_idle", "retr_idle", "retr_concurrent", "stor_concurrent"})
#: Bound on the ``NOOP`` that checks the kept sessions before they are used again (s).
PROBE_TIMEOUT = 5.0
#: Bound on ending every kept session when the pool closes, and on the thread's exit (s).
CLOSE_TIMEOUT = 10.0
#: Most sessions one pool keeps (more are ended as before: a bound, not a figure).
MAX_KEPT = 8192


class PoolUnavailable(RuntimeError):
    """The pool's event loop thread could not start (the cause is in the message)."""


def pooled(workload: str) -> bool:
    """Whether ``workload``'s sessions may be kept across cells (:data:`POOLED_WORKLOADS`)."""
    return workload in POOLED_WORKLOADS


class SessionPool:
    """Logged-in sessions to one server (``target``), kept between phases, and the event
    loop thread they live on. Not shared between servers: a pool belongs to one server
    life and is closed when that server stops.

    Attributes:
        target: the server the sessions are logged in to.
        reused: sessions the last :meth:`fill` found alive and kept (count).
        logged_in: sessions the last :meth:`fill` logged in (count).
        dropped: kept sessions the last :meth:`fill` found dead and closed (count).
        greeted / late: sessions the last fill logged in that got their greeting, and those
            of them that waited more than runner.load.result.LATE_SESSION_S for it; the next
            phase that takes them adds both to its own (zeroed here), so a row's late
            sessions are counted as when its phase logged them in.
    """

    def __init__(self, target: Target) -> None:
        self.target = target
        self._kept: list[FTPSession] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._failed: BaseException | None = None
        self.reused = 0
        self.logged_in = 0
        self.dropped = 0
        self.greeted = 0
        self.late = 0

    def __len__(self) -> int:
        return len(self._kept)

    # -- the pool's event loop -----------------------------------------------------------
    def _start(self) -> asyncio.AbstractEventLoop:
        if self._loop is not None:
            return self._loop
        from runner.load.loop import loop_factory

        ready = threading.Event()
        box: dict[str, asyncio.AbstractEventLoop] = {}

        def serve() -> None:
            loop = loop_factory()()
            box["loop"] = loop
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        def body() -> None:
            try:
                if self.target.netns:
                    from runner.net.netns import call_in_netns

                    call_in_netns(self.target.netns, serve)
                else:
                    serve()
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
                self._failed = e
                ready.set()

        self._thread = threading.Thread(target=body, name="xferlab-sessions", daemon=True)
        self._thread.start()
        ready.wait(CLOSE_TIMEOUT)
        if "loop" not in box:
            raise PoolUnavailable(f"the session pool's event loop did not start: {self._failed or 'no answer'}")
        self._loop = box["loop"]
        return self._loop

    def run(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run the coroutine ``make()`` on the pool's event loop (started on first use) and
        return its result; blocks the calling thread, which must not be that loop's.

        Raises:
            PoolUnavailable: the loop's thread could not start (e.g. the namespace could not be
                joined: the cause is named); else whatever the coroutine raises.
        """
        loop = self._start()
        return asyncio.run_coroutine_threadsafe(make(), loop).result()

    # -- sessions (on the pool's loop) ---------------------------------------------------
    async def _alive(self, sessions: list[FTPSession]) -> list[FTPSession]:
        """Those of ``sessions`` that answer ``NOOP`` with 200 within PROBE_TIMEOUT (all at
        once); the others are closed."""
        async def probe(s: FTPSession) -> bool:
            try:
                async with asyncio.timeout(PROBE_TIMEOUT):
                    await s.noop()
                return True
            except (FTPError, TimeoutError, OSError):
                return False

        ok = await asyncio.gather(*(probe(s) for s in sessions))
        alive = []
        for s, good in zip(sessions, ok):
            if good:
                alive.append(s)
            else:
                s.close()
        return alive

    async def fill(self, n: int, login: Callable[[int], Coroutine[Any, Any, list[FTPSession]]]) -> int:
        """Make the pool hold ``n`` live sessions: probe the kept ones (NOOP), close the dead,
        and log in the missing with ``login(k)`` (a coroutine returning the sessions that
        logged in; the caller's login mode and error counting). Returns the sessions held.
        Sets :attr:`reused`, :attr:`logged_in` and :attr:`dropped`. Runs on the pool's loop."""
        kept = self._kept[:n]
        for s in self._kept[n:]:  # more than asked: not needed by this row
            s.close()
        alive = await self._alive(kept) if kept else []
        self.dropped = len(kept) - len(alive)
        self.reused = len(alive)
        self.logged_in = 0
        self._kept = alive
        if len(alive) < n:
            new = await login(n - len(alive))
            self.logged_in = len(new)
            self._kept.extend(new)
        return len(self._kept)

    def take(self, n: int) -> list[FTPSession]:
        """Up to ``n`` kept sessions, removed from the pool (the phase owns them until it
        hands them back with :meth:`put` or ends them)."""
        got, self._kept = self._kept[:n], self._kept[n:]
        return got

    def put(self, sessions: list[FTPSession]) -> None:
        """Keep ``sessions`` (healthy, logged in, nothing in flight) for the next phase;
        beyond MAX_KEPT they are closed."""
        for s in sessions:
            if len(self._kept) < MAX_KEPT:
                self._kept.append(s)
            else:
                s.close()

    async def _end(self, wait_close: bool) -> None:
        kept, self._kept = self._kept, []
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT):
                await asyncio.gather(*(s.quit(wait_close=wait_close) for s in kept), return_exceptions=True)
        except TimeoutError:
            log.info("session pool: QUIT of %d kept sessions did not finish within %g s", len(kept), CLOSE_TIMEOUT)
        for s in kept:
            s.close()

    def close(self, *, wait_close: bool = True) -> None:
        """End every kept session (QUIT, bounded by CLOSE_TIMEOUT, then close) and stop the
        pool's loop and thread. ``wait_close``: wait until the server has closed each
        connection after its 221 (its session processes gone before a next phase
        measures it); False when the server stops next and its sessions' exit is nobody's
        figure (proftpd: up to 3.3 s for 300 sessions, which wait in turn for its scoreboard's
        lock file as they exit). Never raises; idempotent."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._end(wait_close), loop).result(CLOSE_TIMEOUT + 1.0)
        except Exception as exc:  # noqa: BLE001 - cleanup must not end the campaign
            log.info("session pool: ending the kept sessions failed: %s", exc)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(CLOSE_TIMEOUT)

