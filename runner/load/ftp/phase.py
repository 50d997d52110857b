"""Bookkeeping of one load phase (runner.load.ftp.workloads): counters, open sessions, clocks,
errors by kind, the phase timeout and the untimed teardown; the process-wide
preparations (descriptor limit, garbage collector paused). Timing method:
:mod:`runner.load.ftp.workloads`."""
from __future__ import annotations

import asyncio
import gc
import os
import resource
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from runner.catalogue.workloads import LOGIN_WINDOW, WorkloadParams
from runner.load.base import MEASURE_BEGIN, MEASURE_END
from runner.load.ftp.session import FTPError, FTPSession, classify
from runner.load.result import LATE_SESSION_S, ClientFigures, OpFigures, PhaseResult, SessionFigures
from runner.load.target import Target
from runner.metrics import runqueue

if TYPE_CHECKING:
    from runner.load.ftp.session_pool import SessionPool

#: Largest number of single-stream transfers in one phase (a bound on the repeat loop).
MAX_REPEATS = 1_000_000
#: Bound on the untimed teardown (QUIT of all sessions, DELE of uploaded files) (s).
TEARDOWN_TIMEOUT = 10.0


def raise_nofile_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (capped at 2**20),
    so hundreds of sessions (2 descriptors each while transferring) fit. Returns the
    resulting soft limit. Never raises."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    want = min(want, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        return want
    except (ValueError, OSError):
        return soft


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with Python's cyclic garbage collector paused: collect the two young
    generations, freeze what is left (``gc.freeze``, so no collection scans it), disable
    the collector, and on exit unfreeze and restore whether it was enabled.

    The oldest generation is not collected here: a full collection scans the whole heap
    of a campaign process (about 230,000 objects: 0.2 to 0.75 s before every phase,
    measured at load averages 12 to 44 on two cores), while the young generations hold
    what the previous phase left (0.1 ms). The collector is off during
    the phase either way; the full collections the interpreter schedules itself run
    after the phase, in untimed code."""
    was_enabled = gc.isenabled()
    gc.collect(1)
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


class ClientSpan:
    """One client's bytes and the span from its first operation's start to its last
    operation's end (``perf_counter`` seconds; None before the first), as an open-loop
    client keeps them; ``ok`` False once one of its operations failed."""

    __slots__ = ("bytes", "first", "last", "ok")

    def __init__(self) -> None:
        self.bytes = 0
        self.first: float | None = None
        self.last: float | None = None
        self.ok = True

    def figures(self) -> ClientFigures:
        """Its bytes and span (0.0 before an operation ended), for Jain's index over clients."""
        span = (self.last - self.first) if self.first is not None and self.last is not None else 0.0
        return ClientFigures(self.bytes, span, self.ok)


class Phase:
    """Mutable state of one phase: counters, open sessions, measurement clocks."""

    def __init__(self, workload: str, target: Target, params: WorkloadParams,
                 checkpoint: Callable[[str], None] | None,
                 progress: Callable[[str], None] | None, pool: SessionPool | None = None) -> None:
        self.workload = workload
        self.pool = pool  # sessions kept across the cells of a server life (runner.load.ftp.session_pool)
        self.target = target
        self.p = params
        self._checkpoint = checkpoint
        self._progress = progress
        self.sessions: set[FTPSession] = set()
        self.errors: Counter[str] = Counter()
        self.first_error: dict[str, str] = {}
        self.notes: list[str] = []
        self.bytes = 0
        self.ops = 0
        self.latencies_ms: list[float] = []
        self.clients: list[ClientFigures] = []
        self.histograms: dict[str, str] = {}  # encoded HDR histograms (runner.load.hdr)
        self.logged_in = 0
        self.reused = 0  # sessions taken from the pool, logged in by an earlier cell
        self.greeted = 0  # sessions that got their greeting
        self.late = 0     # ... after more than LATE_SESSION_S
        self.pending = 0  # operations started or planned and not finished
        # measurement clocks
        self.single = False  # single-stream: elapsed = sum of spans
        self.span_acc = 0.0
        self.inflight_t0: float | None = None
        self.t0: float | None = None
        self.t1: float | None = None
        self.cpu0: os.times_result | None = None
        self.wall_ref: tuple[float, float] | None = None  # (time.time(), perf_counter()) at begin
        self.cpu_user = 0.0
        self.cpu_sys = 0.0
        self.rq0: dict[int, int] | None = None  # run-queue wait per thread at begin (runner.metrics.runqueue)
        self.rq_wait: float | None = None
        self.psi0: int | None = None  # the machine's CPU pressure at begin, us (runner.metrics.runqueue)
        self.psi_s: float | None = None
        self.cpu_set: set[int] = set()  # the CPUs this client may run on, read at begin
        self.steal0: float | None = None  # their steal seconds at begin (runner.metrics.runqueue)
        self.steal_share: float | None = None
        self.measuring = False
        self.handshakes_ms: list[float] = []  # FTPS: each session's control-connection handshake
        self.tls: dict[str, str] = {}  # FTPS: mode, key type, negotiated protocol and cipher
        # mixed phases (runner.load.ftp.mixed)
        self.op_figures: dict[str, OpFigures] = {}
        self.buckets: dict[str, OpFigures] = {}
        self.mixed_sessions: list[SessionFigures] = []
        self.deleted: list[str] = []

    # -- helpers ------------------------------------------------------------------
    def kw(self) -> dict:
        p = self.p
        return dict(op_timeout=p.op_timeout, connect_timeout=p.connect_timeout, passive=p.passive,
                    buffer_size=p.buffer_size, tls=self.target.tls)

    def progress(self, msg: str) -> None:
        if self._progress is not None:
            self._progress(f"{self.workload}: {msg}")

    def checkpoint(self, name: str) -> None:
        if self._checkpoint is not None:
            self._checkpoint(name)

    def error(self, exc: BaseException) -> str:
        kind = classify(exc)
        self.errors[kind] += 1
        self.first_error.setdefault(kind, str(exc))
        return kind

    def begin(self) -> None:
        """Start the measured phase: CPU, run-queue wait, the machine's CPU pressure and wall
        clocks, after the ``MEASURE_BEGIN`` checkpoint (runner.load.base: the cell reads the
        server's CPU counters and switches its profiler on there, outside the span)."""
        self.checkpoint(MEASURE_BEGIN)
        self.rq0 = runqueue.thread_waits()
        self.psi0 = runqueue.cpu_pressure_us()
        self.cpu_set = os.sched_getaffinity(0)
        self.steal0 = runqueue.cpu_steal_s(self.cpu_set)
        self.cpu0 = os.times()
        self.t0 = time.perf_counter()
        self.wall_ref = (time.time(), self.t0)
        self.measuring = True

    def end(self) -> None:
        """End the measured phase (idempotent)."""
        if not self.measuring:
            return
        self.measuring = False
        c, c0 = os.times(), self.cpu0
        self.rq_wait = runqueue.waited_s(self.rq0, runqueue.thread_waits())
        psi1 = runqueue.cpu_pressure_us()
        self.psi_s = (psi1 - self.psi0) / 1e6 if psi1 is not None and self.psi0 is not None else None
        assert c0 is not None, "end() without begin()"  # measuring is set by begin() only
        self.cpu_user = c.user - c0.user
        self.cpu_sys = c.system - c0.system
        if self.t1 is None:
            self.t1 = time.perf_counter()
        self.steal_share = runqueue.steal_share(self.steal0, runqueue.cpu_steal_s(self.cpu_set), self.elapsed_s(),
                                                len(self.cpu_set))
        self.checkpoint(MEASURE_END)

    def on_phase_timeout(self) -> None:
        now = time.perf_counter()
        if self.pending > 0:
            self.errors["timeout"] += self.pending
            self.first_error.setdefault("timeout", f"phase timeout {self.p.phase_timeout:g} s")
        self.notes.append(f"phase timeout after {self.p.phase_timeout:g} s: "
                          f"{self.pending} unfinished operations counted as timeout")
        self.pending = 0
        if self.single and self.inflight_t0 is not None:
            self.span_acc += now - self.inflight_t0
            self.inflight_t0 = None
        if self.measuring:
            self.t1 = now
            self.end()

    def close_all(self) -> None:
        for s in self.sessions:
            s.close()
        self.sessions.clear()

    def elapsed_s(self) -> float:
        """Seconds from begin() to the end of the measured phase (or now, while it runs);
        0.0 before begin()."""
        if self.t0 is None:
            return 0.0
        return (self.t1 if self.t1 is not None else time.perf_counter()) - self.t0

    def result(self) -> PhaseResult:
        elapsed = self.span_acc if self.single else self.elapsed_s()
        started_at = ended_at = None
        if self.wall_ref is not None and self.t0 is not None:  # wall clock of the measured phase
            started_at = self.wall_ref[0] + (self.t0 - self.wall_ref[1])
            ended_at = (self.wall_ref[0] + (self.t1 - self.wall_ref[1]) if self.t1 is not None
                        else started_at + max(elapsed, 0.0))
        notes = list(self.notes)
        if self.late:
            notes.append(f"late sessions: {self.late} of {self.greeted} waited > {LATE_SESSION_S:g} s for "
                         "connect + greeting (handshake retransmitted by the kernel: see the TCP counters)")
        for kind, msg in sorted(self.first_error.items()):
            notes.append(f"first {kind} error: {msg}")
        return PhaseResult(
            workload=self.workload, elapsed_s=max(elapsed, 0.0), bytes=self.bytes, ops=self.ops,
            latencies_ms=self.latencies_ms, errors=dict(self.errors), clients=self.clients,
            client_cpu_user_s=self.cpu_user, client_cpu_system_s=self.cpu_sys,
            client_runqueue_wait_s=self.rq_wait, client_steal_share=self.steal_share, cpu_pressure_s=self.psi_s,
            notes=notes, started_at=started_at,
            ended_at=ended_at,
            greeted_sessions=self.greeted,
            late_sessions=self.late, histograms=dict(self.histograms),
            user_rate=self.p.user_rate if self.histograms else 0, tls_handshake_ms=self.handshakes_ms, tls=self.tls,
            op_figures=dict(self.op_figures), buckets=dict(self.buckets), sessions=list(self.mixed_sessions),
            seed=self.p.seed if self.workload == "mixed" else None, deleted=list(self.deleted))

    # -- sessions -----------------------------------------------------------------
    async def open_session(self) -> tuple[FTPSession, float]:
        """Connect and log in one session of this phase, counting its greeting, a late
        greeting (over LATE_SESSION_S), its login and its TLS handshake. Returns (the
        session, connect+login seconds). Raises what the connection or the login raised
        (FTPError for a refused login), with the session closed and forgotten."""
        t = self.target
        s = FTPSession(t.host, t.port, **self.kw())
        self.sessions.add(s)
        t0 = time.perf_counter()
        try:
            try:
                await s.connect()
            finally:
                if s.handshake_s is not None:
                    self.handshakes_ms.append(s.handshake_s * 1000.0)
                    if not self.tls and (tls := t.tls) is not None:
                        self.tls = {"mode": tls.mode, "key_type": tls.key_type, **s.tls_info}
            self.greeted += 1
            if time.perf_counter() - t0 > LATE_SESSION_S:
                self.late += 1
            await s.login(t.user, t.password)
        except BaseException:
            self.sessions.discard(s)
            s.close()
            raise
        self.logged_in += 1
        return s, time.perf_counter() - t0

    async def login_one(self, binary: bool) -> tuple[FTPSession | None, float]:
        """Connect + log in one session (:meth:`open_session`; and TYPE I when ``binary``,
        outside the latency). Returns (session or None on error, connect+login latency in ms)."""
        try:
            s, seconds = await self.open_session()
        except FTPError as e:
            self.error(e)
            return None, 0.0
        if binary and not await self.to_binary(s):
            return None, 0.0
        return s, seconds * 1000.0

    async def to_binary(self, s: FTPSession) -> bool:
        """``TYPE I`` on ``s`` (untimed); on failure its error is counted and ``s`` closed
        and forgotten. Returns whether it succeeded."""
        try:
            await s.type_binary()
        except FTPError as e:
            self.error(e)
            self.sessions.discard(s)
            s.close()
            return False
        return True

    async def login_many(self, n: int, binary: bool, *, measured: bool) -> list[FTPSession]:
        """Log in ``n`` sessions in ``params.login_mode`` (``window``: at most
        runner.catalogue.workloads.LOGIN_WINDOW at once); returns those that succeeded.
        When ``measured``, each success is an op with its latency."""
        out: list[FTPSession] = []
        self.pending = n

        def done(s: FTPSession | None, lat: float) -> None:
            self.pending -= 1
            if s is not None:
                out.append(s)
                if measured:
                    self.ops += 1
                    self.latencies_ms.append(lat)

        if self.p.login_mode == "sequential":
            for _ in range(n):
                done(*await self.login_one(binary))
        elif self.p.login_mode == "window":
            slots = asyncio.Semaphore(LOGIN_WINDOW)

            async def in_window() -> None:
                async with slots:
                    got = await self.login_one(binary)
                done(*got)
            await asyncio.gather(*(in_window() for _ in range(n)))
        else:
            async def one() -> None:
                done(*await self.login_one(binary))
            await asyncio.gather(*(one() for _ in range(n)))
        return out

    async def setup_sessions(self, n: int, binary: bool) -> list[FTPSession]:
        """The ``n`` logged-in sessions a phase holds before what it measures (untimed):
        without a pool, :meth:`login_many`; with one, the pool's kept sessions first
        (``TYPE I`` sent to those not yet binary when ``binary``), the missing ones logged
        in here, counted as before. Returns those that are ready; a note says how many
        were kept."""
        if self.pool is None:
            self.progress(f"logging in {n} sessions ({self.p.login_mode})")
            return await self.login_many(n, binary, measured=False)
        got = self.pool.take(n)
        self.sessions.update(got)
        self.greeted += self.pool.greeted  # logged in for this phase just before it (late ones are a figure)
        self.late += self.pool.late
        self.pool.greeted = self.pool.late = 0
        ok = await asyncio.gather(*(self.to_binary(s) if binary and not s.binary else _true() for s in got))
        ready = [s for s, good in zip(got, ok) if good]
        self.reused = len(ready)
        self.progress(f"{len(ready)} of {n} sessions kept from earlier cells"
                      + (f", logging in {n - len(ready)} ({self.p.login_mode})" if len(ready) < n else ""))
        new = await self.login_many(n - len(ready), binary, measured=False) if len(ready) < n else []
        self.notes.append(f"sessions: {len(ready)} of {n} kept from earlier cells of this server, "
                          f"{len(new)} logged in")
        return ready + new

    async def teardown(self, sessions: list[FTPSession], dele: Sequence[str] = (),
                       keep: Sequence[FTPSession] = ()) -> None:
        """Untimed, errors ignored: DELE uploaded files, QUIT all sessions, close; with a
        pool, those of ``keep`` that are still open go back to it after the DELEs
        instead (healthy sessions the next cell of this server reuses).

        The files are deleted over all live sessions at once (file ``i`` by session
        ``i mod n``, each session's share one after another): 300 uploaded files cost
        300 round trips on one session otherwise (4.6 to 6.7 s per 300-client STOR cell
        measured under docker), every DELE waiting for the previous one. The server
        deletes the same files either way, before the next phase."""
        self.pending = 0
        self.end()
        live = [s for s in sessions if s in self.sessions]

        async def delete(s: FTPSession, names: Sequence[str]) -> None:
            for name in names:
                try:
                    await s.dele(name)
                except FTPError:
                    pass

        kept: list[FTPSession] = []
        try:
            async with asyncio.timeout(min(self.p.op_timeout, TEARDOWN_TIMEOUT)):
                if dele and live:
                    await asyncio.gather(*(delete(s, dele[i::len(live)]) for i, s in enumerate(live)))
                if self.pool is not None:
                    wanted = set(keep)
                    kept = [s for s in live if s in wanted]
                    live = [s for s in live if s not in wanted]
                await asyncio.gather(*(s.quit() for s in live), return_exceptions=True)
        except TimeoutError:
            self.notes.append("teardown (QUIT) did not finish within "
                              f"{min(self.p.op_timeout, TEARDOWN_TIMEOUT):g} s")
            live, kept = live + kept, []  # a session in the middle of a DELE is not kept
        if kept:
            self.sessions.difference_update(kept)
            assert self.pool is not None  # kept is filled only with a pool
            self.pool.put(kept)
        for s in live:
            s.close()
            self.sessions.discard(s)


async def _true() -> bool:
    return True
