"""Run one classic-suite workload against an FTP server and return its PhaseResult.

The eight workloads are seed 000's ``ftpbench -b all`` benchmarks (DESIGN.md, "The
classic suite"); see :mod:`runner.load.workloads` for names and parameters. Every
phase is bounded by ``params.phase_timeout``: on expiry everything in flight is
cancelled, unfinished operations are counted as ``timeout`` errors, all sockets are
closed and the partial result is returned (a failure is a result to record).

Timing method (units as docs/methodology.md):

* ``stor`` / ``retr`` (and the ``*_idle`` variants): one session repeats the transfer
  of the ``transfer_size`` fixture until ``duration`` seconds have passed (at least
  once). ``elapsed_s`` is the sum of the transfers' spans, each from its first
  command (PASV/EPSV) to its ``226`` (the untimed SIZE check between STORs is
  excluded); ``bytes`` counts confirmed bytes only; ``latencies_ms`` one per transfer.
* ``login``: N sessions connect and log in (``concurrent``: all at once, or
  ``sequential``: one after another, as ftpbench really does). ``elapsed_s`` is the
  whole phase; ``latencies_ms`` per session connect+login.
* ``retr_concurrent`` / ``stor_concurrent``: N logged-in sessions (untimed) each
  transfer a ``file_size`` file at once; ``elapsed_s`` from the first transfer start
  to the last completion; ``clients`` holds per-session figures (fairness).
* ``quit``: N logged-in sessions send QUIT at once; ``elapsed_s`` until all got
  ``221`` and saw the connection closed.

Client CPU (``client_cpu_user_s`` / ``client_cpu_system_s``) is the ``os.times()``
delta of this process over the measured phase only.

Garbage collection: the client's cyclic garbage collector must not pause a phase (a
generation-2 collection of a long campaign's heap took 88 ms here, turning a 0.05 s
300-client login phase into 0.137 s). Each phase therefore runs with the heap
collected and frozen beforehand (``gc.collect()``, ``gc.freeze()``, untimed) and the
collector disabled; both are undone when the phase ends (:func:`gc_paused`).
Reference counting still frees everything that is not in a cycle, and every phase is
bounded in time, so what accumulates is small.
"""
from __future__ import annotations

import asyncio
import gc
import os
import resource
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from runner.backends.base import Target
from runner.load.fixtures import client_source, ensure_server_file, server_name
from runner.load.ftp import FTPError, FTPSession, _with_timeout, classify
from runner.load.result import ClientFigures, PhaseResult
from runner.load.workloads import WORKLOADS, WorkloadParams

#: Largest number of single-stream transfers in one phase (a bound on the repeat loop).
MAX_REPEATS = 1_000_000
#: Bound on the untimed teardown (QUIT of all sessions, DELE of uploaded files) (s).
TEARDOWN_TIMEOUT = 10.0


class LoadError(Exception):
    """Nothing could be measured: no session ever logged in and no operation timed out
    (e.g. the first connect was refused, or the password was rejected). The message
    names ``host:port`` and the cause."""


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
    """Run the block with Python's cyclic garbage collector paused: collect once and
    freeze the survivors (``gc.freeze``, so no later collection scans them), disable the
    collector, and on exit unfreeze and restore whether it was enabled."""
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


class _Phase:
    """Mutable state of one phase: counters, open sessions, measurement clocks."""

    def __init__(self, workload: str, target: Target, params: WorkloadParams,
                 checkpoint: Callable[[str], None] | None,
                 progress: Callable[[str], None] | None) -> None:
        self.workload = workload
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
        self.logged_in = 0
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
        self.measuring = False

    # -- helpers ------------------------------------------------------------------
    def kw(self) -> dict:
        p = self.p
        return dict(op_timeout=p.op_timeout, passive=p.passive, buffer_size=p.buffer_size)

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
        """Start the measured phase: CPU and wall clocks."""
        self.cpu0 = os.times()
        self.t0 = time.perf_counter()
        self.wall_ref = (time.time(), self.t0)
        self.measuring = True

    def end(self) -> None:
        """End the measured phase (idempotent)."""
        if not self.measuring:
            return
        self.measuring = False
        c = os.times()
        self.cpu_user = c.user - self.cpu0.user
        self.cpu_sys = c.system - self.cpu0.system
        if self.t1 is None:
            self.t1 = time.perf_counter()

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

    def result(self) -> PhaseResult:
        if self.single:
            elapsed = self.span_acc
        elif self.t0 is not None:
            elapsed = (self.t1 if self.t1 is not None else time.perf_counter()) - self.t0
        else:
            elapsed = 0.0
        started_at = ended_at = None
        if self.wall_ref is not None and self.t0 is not None:  # wall clock of the measured phase
            started_at = self.wall_ref[0] + (self.t0 - self.wall_ref[1])
            ended_at = (self.wall_ref[0] + (self.t1 - self.wall_ref[1]) if self.t1 is not None
                        else started_at + max(elapsed, 0.0))
        notes = list(self.notes)
        for kind, msg in sorted(self.first_error.items()):
            notes.append(f"first {kind} error: {msg}")
        return PhaseResult(
            workload=self.workload, elapsed_s=max(elapsed, 0.0), bytes=self.bytes, ops=self.ops,
            latencies_ms=self.latencies_ms, errors=dict(self.errors), clients=self.clients,
            client_cpu_user_s=self.cpu_user, client_cpu_system_s=self.cpu_sys, notes=notes,
            started_at=started_at, ended_at=ended_at)

    # -- sessions -----------------------------------------------------------------
    async def login_one(self, binary: bool) -> tuple[FTPSession | None, float]:
        """Connect + log in one session (and TYPE I when ``binary``, outside the latency).
        Returns (session or None on error, connect+login latency in ms)."""
        t = self.target
        s = FTPSession(t.host, t.port, **self.kw())
        self.sessions.add(s)
        t0 = time.perf_counter()
        try:
            await s.connect()
            await s.login(t.user, t.password)
            lat = (time.perf_counter() - t0) * 1000.0
            self.logged_in += 1
            if binary:
                await s.type_binary()
        except FTPError as e:
            self.error(e)
            self.sessions.discard(s)
            s.close()
            return None, 0.0
        return s, lat

    async def login_many(self, n: int, binary: bool, *, measured: bool) -> list[FTPSession]:
        """Log in ``n`` sessions in ``params.login_mode``; returns those that succeeded.
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
        else:
            async def one() -> None:
                done(*await self.login_one(binary))
            await asyncio.gather(*(one() for _ in range(n)))
        return out

    async def teardown(self, sessions: list[FTPSession], dele: list[str] = ()) -> None:
        """Untimed, errors ignored: DELE uploaded files, QUIT all sessions, close."""
        self.pending = 0
        self.end()
        live = [s for s in sessions if s in self.sessions]
        try:
            async with asyncio.timeout(min(self.p.op_timeout, TEARDOWN_TIMEOUT)):
                if dele and live:
                    for name in dele:
                        try:
                            await live[0].dele(name)
                        except FTPError:
                            pass
                await asyncio.gather(*(s.quit() for s in live), return_exceptions=True)
        except TimeoutError:
            self.notes.append("teardown (QUIT) did not finish within "
                              f"{min(self.p.op_timeout, TEARDOWN_TIMEOUT):g} s")
        for s in live:
            s.close()
            self.sessions.discard(s)


# -- workloads -----------------------------------------------------------------------
async def _login(ph: _Phase) -> None:
    n = ph.p.clients
    ph.notes.append(f"login mode: {ph.p.login_mode}")
    ph.progress(f"{n} sessions connect and log in ({ph.p.login_mode})")
    ph.begin()
    sessions = await ph.login_many(n, binary=False, measured=True)
    ph.t1 = time.perf_counter()
    ph.end()
    ph.progress(f"{len(sessions)}/{n} logged in in {ph.t1 - ph.t0:.3f} s")
    ph.checkpoint("loaded")
    await ph.teardown(sessions)


async def _single_stream(ph: _Phase, direction: str, idle: int) -> None:
    p = ph.p
    idle_sessions: list[FTPSession] = []
    if idle:
        ph.notes.append(f"login mode: {p.login_mode}")
        ph.progress(f"logging in {idle} idle sessions ({p.login_mode})")
        idle_sessions = await ph.login_many(idle, binary=False, measured=False)
        if len(idle_sessions) < idle:
            ph.notes.append(f"setup: {idle - len(idle_sessions)} of {idle} idle sessions "
                            "failed to log in")
    ph.pending = 1
    s, _ = await ph.login_one(binary=True)
    if s is None:
        ph.pending = 0
        return
    size = p.transfer_size
    dele: list[str] = []
    with ExitStack() as stack:
        if direction == "retr":
            ph.progress(f"fixture {server_name(size)}")
            try:
                name = await ensure_server_file(s if ph.target.root is None else None,
                                                ph.target.root, size)
            except FTPError as e:
                ph.error(e)
                ph.notes.append("setup: cannot place the RETR fixture")
                ph.pending = 0
                await ph.teardown([s, *idle_sessions])
                return
            f = None
        else:
            f = stack.enter_context(open(client_source(size), "rb"))
            name = f"xferlab-stor-{os.getpid()}.bin"
            dele.append(name)
        ph.progress(f"{direction.upper()} {size} bytes repeated for {p.duration:g} s"
                    + (f" with {idle} idle sessions" if idle else ""))
        ph.single = True
        ph.begin()
        stop_at = time.perf_counter() + p.duration
        for _ in range(MAX_REPEATS):
            t0 = ph.inflight_t0 = time.perf_counter()
            try:
                if f is None:
                    n = await s.retr(name, size)
                else:
                    n = await _with_timeout(s.stor_transfer(name, f, size), p.op_timeout,
                                            f"STOR {name}")
            except FTPError as e:
                ph.span_acc += time.perf_counter() - t0
                ph.inflight_t0 = None
                ph.error(e)
                ph.pending = 0
                break
            t1 = time.perf_counter()
            ph.span_acc += t1 - t0
            ph.inflight_t0 = None
            if f is not None:  # untimed: the server must hold every byte sent
                try:
                    await s.verify_size(name, n)
                except FTPError as e:
                    ph.error(e)
                    ph.pending = 0
                    break
            ph.bytes += n
            ph.ops += 1
            ph.latencies_ms.append((t1 - t0) * 1000.0)
            if t1 >= stop_at:
                break
        ph.pending = 0
        ph.end()
        ph.progress(f"{ph.ops} transfers, {ph.bytes / (1 << 20) / ph.span_acc if ph.span_acc else 0:.1f}"
                    " MiB/s")
        ph.checkpoint("loaded")
    await ph.teardown([s, *idle_sessions], dele)


async def _concurrent_transfer(ph: _Phase, direction: str) -> None:
    p = ph.p
    n = p.clients
    size = p.file_size
    ph.notes.append(f"login mode: {p.login_mode}")
    ph.progress(f"logging in {n} sessions ({p.login_mode})")
    sessions = await ph.login_many(n, binary=True, measured=False)
    if not sessions:
        return
    dele: list[str] = []
    with ExitStack() as stack:
        if direction == "retr":
            try:
                name = await ensure_server_file(sessions[0] if ph.target.root is None else None,
                                                ph.target.root, size)
            except FTPError as e:
                ph.error(e)
                ph.notes.append("setup: cannot place the RETR fixture")
                await ph.teardown(sessions)
                return
            names = [name] * len(sessions)
            f = None
        else:
            f = stack.enter_context(open(client_source(size), "rb"))
            if p.same_file:
                names = [f"xferlab-stor-{os.getpid()}-same.bin"] * len(sessions)
                dele.append(names[0])
                ph.notes.append("STOR: all clients write one file")
            else:
                names = [f"xferlab-stor-{os.getpid()}-{i}.bin" for i in range(len(sessions))]
                dele.extend(names)
        ph.checkpoint("loaded")
        ph.progress(f"{len(sessions)} sessions {direction.upper()} {size} bytes at once")
        starts: list[float] = []
        ends: list[float] = []
        figs: list[ClientFigures | None] = [None] * len(sessions)
        sent: list[int] = [0] * len(sessions)

        async def one(i: int, s: FTPSession) -> None:
            t0 = time.perf_counter()
            starts.append(t0)
            try:
                if f is None:
                    k = await s.retr(names[i], size)
                else:
                    k = await _with_timeout(s.stor_transfer(names[i], f, size), p.op_timeout,
                                            f"STOR {names[i]}")
            except FTPError as e:
                t1 = time.perf_counter()
                ph.error(e)
                figs[i] = ClientFigures(0, t1 - t0, False)
            else:
                t1 = time.perf_counter()
                sent[i] = k
                figs[i] = ClientFigures(k, t1 - t0, True)
                ph.latencies_ms.append((t1 - t0) * 1000.0)
            ends.append(t1)
            ph.pending -= 1

        ph.pending = len(sessions)
        ph.begin()
        try:
            await asyncio.gather(*(one(i, s) for i, s in enumerate(sessions)))
        finally:
            if ends:
                ph.t0 = min(starts)
                ph.t1 = max(ends) if ph.pending == 0 else time.perf_counter()
            # clients unfinished at a phase timeout still get a (failed) figure
            ph.clients = [c if c is not None else ClientFigures(0, 0.0, False) for c in figs]
            for c in ph.clients:
                if c.ok:
                    ph.ops += 1
                    ph.bytes += c.bytes
        ph.end()
        # untimed: confirm what the server holds (RFC 3659 SIZE)
        if f is not None:
            await _verify_stor(ph, sessions, names, sent, ph.clients, size, p.same_file)
        ph.progress(f"{ph.ops}/{len(sessions)} transfers in {ph.t1 - ph.t0:.3f} s")
    await ph.teardown(sessions, dele)


async def _verify_stor(ph: _Phase, sessions, names, sent, figs, size: int, same_file: bool) -> None:
    if same_file:
        if not any(sent):
            return
        s = next(s for s, k in zip(sessions, sent) if k)
        try:
            await s.verify_size(names[0], size)
        except FTPError as e:
            ph.error(e)
            ph.notes.append("same-file STOR: server file size differs from file_size "
                            "after all transfers")
        return

    async def check(i: int) -> None:
        try:
            await sessions[i].verify_size(names[i], sent[i])
        except FTPError as e:
            ph.error(e)
            if figs[i].ok:
                ph.ops -= 1
                ph.bytes -= figs[i].bytes
            figs[i].ok = False
            figs[i].bytes = 0

    await asyncio.gather(*(check(i) for i in range(len(sessions)) if sent[i]))


async def _quit(ph: _Phase) -> None:
    n = ph.p.clients
    ph.notes.append(f"login mode: {ph.p.login_mode}")
    ph.progress(f"logging in {n} sessions ({ph.p.login_mode})")
    sessions = await ph.login_many(n, binary=False, measured=False)
    if not sessions:
        return
    ph.checkpoint("loaded")
    ph.progress(f"{len(sessions)} sessions QUIT at once")
    ends: list[float] = []

    async def one(s: FTPSession) -> None:
        t0 = time.perf_counter()
        try:
            await s.quit()
        except FTPError as e:
            ph.error(e)
        else:
            t1 = time.perf_counter()
            ph.ops += 1
            ph.latencies_ms.append((t1 - t0) * 1000.0)
            ends.append(t1)
        finally:
            ph.sessions.discard(s)
            ph.pending -= 1

    ph.pending = len(sessions)
    ph.begin()
    await asyncio.gather(*(one(s) for s in sessions))
    ph.t1 = time.perf_counter()
    ph.end()
    ph.progress(f"{ph.ops}/{len(sessions)} QUIT in {ph.t1 - ph.t0:.3f} s")


_IMPLS = {
    "stor": lambda ph: _single_stream(ph, "stor", 0),
    "retr": lambda ph: _single_stream(ph, "retr", 0),
    "login": _login,
    "stor_idle": lambda ph: _single_stream(ph, "stor", ph.p.clients),
    "retr_idle": lambda ph: _single_stream(ph, "retr", ph.p.clients),
    "retr_concurrent": lambda ph: _concurrent_transfer(ph, "retr"),
    "stor_concurrent": lambda ph: _concurrent_transfer(ph, "stor"),
    "quit": _quit,
}


async def run_workload(workload: str, target: Target, params: WorkloadParams, *,
                       checkpoint: Callable[[str], None] | None = None,
                       progress: Callable[[str], None] | None = None) -> PhaseResult:
    """Run one workload phase against ``target`` and return what it measured.

    Args:
        workload: a name of :data:`runner.load.workloads.WORKLOADS` (``stor``, ``retr``,
            ``login``, ``stor_idle``, ``retr_idle``, ``retr_concurrent``,
            ``stor_concurrent``, ``quit``).
        target: where to connect; ``target.root`` (local home path) lets RETR fixtures
            be written directly instead of uploaded by STOR (untimed either way).
        params: workload parameters (clients, sizes, duration, timeouts, ...).
        checkpoint: called with ``"loaded"`` at an untimed moment when the load is at
            its maximum (all sessions logged in; or just after the measured transfer
            while idle sessions are still connected). It may block (memory sampling).
        progress: called with human progress messages.

    Returns:
        PhaseResult (see module docstring for the timing method). Errors by kind;
        a phase cut by ``params.phase_timeout`` returns its partial figures with the
        unfinished operations counted as ``timeout``.

    Raises:
        ValueError: unknown workload.
        LoadError: nothing could be measured (no session ever logged in, no timeout):
            e.g. connection refused; the message names host:port and the cause.
    """
    impl = _IMPLS.get(workload)
    if impl is None or workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}")
    raise_nofile_limit()
    ph = _Phase(workload, target, params, checkpoint, progress)
    loop = asyncio.get_running_loop()
    with gc_paused():
        try:
            async with asyncio.timeout_at(loop.time() + params.phase_timeout):
                await impl(ph)
        except TimeoutError:
            ph.on_phase_timeout()
        finally:
            ph.end()
            ph.close_all()
    if ph.logged_in == 0 and ph.ops == 0 and not ph.errors.get("timeout"):
        cause = "; ".join(f"{k}: {v}" for k, v in sorted(ph.first_error.items())) or "no session"
        raise LoadError(f"{workload}: cannot log in to FTP server {target.host}:{target.port}: "
                        f"{cause}")
    return ph.result()


def run_workload_sync(workload: str, target: Target, params: WorkloadParams, *,
                      checkpoint: Callable[[str], None] | None = None,
                      progress: Callable[[str], None] | None = None) -> PhaseResult:
    """Blocking wrapper of :func:`run_workload` (runs its own event loop with
    ``asyncio.run``; must not be called from a running loop). Same arguments,
    result and exceptions."""
    return asyncio.run(run_workload(workload, target, params, checkpoint=checkpoint,
                                    progress=progress))
