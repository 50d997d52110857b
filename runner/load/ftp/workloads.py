"""Run one FTP workload (the classic suite, the sustained load) against an FTP server and return its PhaseResult.

The eight classic workloads are seed 000's ``ftpbench -b all`` benchmarks (DESIGN.md, "The
classic suite"); see :mod:`runner.catalogue.workloads` for names and parameters. Every
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
* ``retr_sustained`` / ``stor_sustained``: N clients loop transfers for ``duration`` s,
  closed or open loop, latencies in HDR histograms: :mod:`runner.load.ftp.sustained`.
* ``mixed``: N clients run sessions of weighted operations with think times, figures per
  operation kind and size bucket: :mod:`runner.load.ftp.mixed`.

Client CPU (``client_cpu_user_s`` / ``client_cpu_system_s``) is the ``os.times()``
delta of this process over the measured phase only.

Garbage collection: the client's cyclic garbage collector must not pause a phase (a
generation-2 collection of a long campaign's heap took 88 ms here, turning a 0.05 s
300-client login phase into 0.137 s). Each phase therefore runs with the young
generations collected and the heap frozen beforehand (``gc.collect(1)``, ``gc.freeze()``,
untimed) and the collector disabled; both are undone when the phase ends
(:func:`runner.load.ftp.phase.gc_paused`, which says why the oldest generation is left
to the interpreter's own collections between phases).
Reference counting still frees everything that is not in a cycle, and every phase is
bounded in time, so what accumulates is small.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from contextlib import ExitStack

from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.load import loop as event_loop
from runner.load.base import LoadError
from runner.load.ftp.fixtures import client_source, ensure_server_file, server_name
from runner.load.ftp.mixed import run_mixed
from runner.load.ftp.phase import MAX_REPEATS, Phase, gc_paused, raise_nofile_limit
from runner.load.ftp.session import FTPError, FTPSession, _with_timeout
from runner.load.ftp.session_pool import PoolUnavailable, SessionPool, pooled
from runner.load.ftp.sustained import run_sustained
from runner.load.result import ClientFigures, PhaseResult
from runner.load.target import Target
from runner.net.netns import NetnsError

log = logging.getLogger(__name__)


# -- workloads -----------------------------------------------------------------------
async def _login(ph: Phase) -> None:
    n = ph.p.clients
    ph.notes.append(f"login mode: {ph.p.login_mode}")
    ph.progress(f"{n} sessions connect and log in ({ph.p.login_mode})")
    ph.begin()
    sessions = await ph.login_many(n, binary=False, measured=True)
    ph.t1 = time.perf_counter()
    ph.end()
    ph.progress(f"{len(sessions)}/{n} logged in in {ph.elapsed_s():.3f} s")
    ph.checkpoint("loaded")
    await ph.teardown(sessions)


async def _single_stream(ph: Phase, direction: str, idle: int) -> None:
    p = ph.p
    idle_sessions: list[FTPSession] = []
    if idle:
        ph.notes.append(f"login mode: {p.login_mode}")
        idle_sessions = await ph.setup_sessions(idle, binary=False)
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
                                                ph.target.root, size, ph.progress)
            except FTPError as e:
                ph.error(e)
                ph.notes.append("setup: cannot place the RETR fixture")
                ph.pending = 0
                await ph.teardown([s, *idle_sessions])
                return
            f = None
        else:
            f = stack.enter_context(open(client_source(size, ph.progress), "rb"))
            name = f"xferlab-stor-{os.getpid()}.bin"
            dele.append(name)
        ph.progress(f"{direction.upper()} {size} bytes repeated for {p.duration:g} s"
                    + (f" with {idle} idle sessions" if idle else ""))
        ph.single = True
        if f is not None:
            await event_loop.start_worker_thread()  # untimed: the first to_thread imports and clones
        ph.begin()
        stop_at = time.perf_counter() + p.duration
        for _ in range(MAX_REPEATS):
            t0 = ph.inflight_t0 = time.perf_counter()
            try:
                if f is None:
                    n = await s.retr(name, size)
                else:
                    n = await _with_timeout(s.stor_transfer(name, f, size, alone=True), p.op_timeout,
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
    await ph.teardown([s, *idle_sessions], dele, keep=idle_sessions)


async def _concurrent_transfer(ph: Phase, direction: str) -> None:
    p = ph.p
    n = p.clients
    size = p.file_size
    ph.notes.append(f"login mode: {p.login_mode}")
    sessions = await ph.setup_sessions(n, binary=True)
    if not sessions:
        return
    dele: list[str] = []
    with ExitStack() as stack:
        if direction == "retr":
            try:
                name = await ensure_server_file(sessions[0] if ph.target.root is None else None,
                                                ph.target.root, size, ph.progress)
            except FTPError as e:
                ph.error(e)
                ph.notes.append("setup: cannot place the RETR fixture")
                await ph.teardown(sessions)
                return
            names = [name] * len(sessions)
            f = None
        else:
            f = stack.enter_context(open(client_source(size, ph.progress), "rb"))
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
        ph.progress(f"{ph.ops}/{len(sessions)} transfers in {ph.elapsed_s():.3f} s")
    # sessions whose transfer failed are ended, never kept (runner.load.ftp.session_pool)
    await ph.teardown(sessions, dele, keep=[s for s, c in zip(sessions, ph.clients) if c.ok])


async def _verify_stor(ph: Phase, sessions, names, sent, figs, size: int, same_file: bool) -> None:
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


async def _quit(ph: Phase) -> None:
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
    ph.progress(f"{ph.ops}/{len(sessions)} QUIT in {ph.elapsed_s():.3f} s")


_IMPLS = {
    "stor": lambda ph: _single_stream(ph, "stor", 0),
    "retr": lambda ph: _single_stream(ph, "retr", 0),
    "login": _login,
    "stor_idle": lambda ph: _single_stream(ph, "stor", ph.p.clients),
    "retr_idle": lambda ph: _single_stream(ph, "retr", ph.p.clients),
    "retr_concurrent": lambda ph: _concurrent_transfer(ph, "retr"),
    "stor_concurrent": lambda ph: _concurrent_transfer(ph, "stor"),
    "quit": _quit,
    "retr_sustained": lambda ph: run_sustained(ph, "retr"),
    "stor_sustained": lambda ph: run_sustained(ph, "stor"),
    "mixed": run_mixed,
}


async def run_workload(workload: str, target: Target, params: WorkloadParams, *,
                       checkpoint: Callable[[str], None] | None = None,
                       progress: Callable[[str], None] | None = None,
                       pool: SessionPool | None = None) -> PhaseResult:
    """Run one workload phase against ``target`` and return what it measured.

    Args:
        workload: a name of :data:`runner.catalogue.workloads.WORKLOADS` (``stor``, ``retr``,
            ``login``, ``stor_idle``, ``retr_idle``, ``retr_concurrent``,
            ``stor_concurrent``, ``quit``, ``retr_sustained``, ``stor_sustained``).
        target: where to connect; ``target.root`` (local home path) lets RETR fixtures
            be written directly instead of uploaded by STOR (untimed either way).
        params: workload parameters (clients, sizes, duration, timeouts, ...).
        checkpoint: called with ``"loaded"`` at an untimed moment when the load is at
            its maximum (all sessions logged in; or just after the measured transfer
            while idle sessions are still connected). It may block (memory sampling).
        progress: called with human progress messages.
        pool: logged-in sessions kept across the cells of one server life
            (runner.load.ftp.session_pool); used by its pooled workloads only, which take
            their sessions from it and hand the healthy ones back. The coroutine must run on
            the pool's event loop (:func:`run_workload_sync` sees to it).

    Returns:
        PhaseResult (see module docstring for the timing method). Errors by kind;
        a phase cut by ``params.phase_timeout`` returns its partial figures with the
        unfinished operations counted as ``timeout``.

    Raises:
        ValueError: unknown workload.
        LoadError: nothing could be measured (no session ever logged in or was kept, no timeout):
            e.g. connection refused; the message names host:port and the cause.
    """
    impl = _IMPLS.get(workload)
    if impl is None or workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; known: {', '.join(WORKLOADS)}")
    raise_nofile_limit()
    ph = Phase(workload, target, params, checkpoint, progress, pool if pooled(workload) else None)
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
    if ph.logged_in == 0 and ph.reused == 0 and ph.ops == 0 and not ph.errors.get("timeout"):
        cause = "; ".join(f"{k}: {v}" for k, v in sorted(ph.first_error.items())) or "no session"
        raise LoadError(f"{workload}: cannot log in to FTP server {target.host}:{target.port}: "
                        f"{cause}")
    return ph.result()


def run_workload_sync(workload: str, target: Target, params: WorkloadParams, *,
                      checkpoint: Callable[[str], None] | None = None,
                      progress: Callable[[str], None] | None = None,
                      pool: SessionPool | None = None) -> PhaseResult:
    """Blocking wrapper of :func:`run_workload` (runs its own event loop,
    :func:`runner.load.loop.run`: uvloop unless ``XFERLAB_EVENT_LOOP=asyncio``; must
    not be called from a running loop). Same arguments,
    result and exceptions. When ``target.netns`` is set, the loop runs in a thread
    that joined that network namespace (:func:`runner.net.netns.call_in_netns`;
    a LoadError naming the namespace when it cannot be joined). With a ``pool`` the phase
    runs on the pool's event loop (its thread, in ``target.netns`` when set), where its
    sessions live."""
    if pool is not None:
        try:
            return pool.run(lambda: run_workload(workload, target, params, checkpoint=checkpoint, progress=progress,
                                                 pool=pool))
        except PoolUnavailable as e:
            raise LoadError(f"{workload}: {e}") from e
    try:
        return event_loop.run_at(target.netns, lambda: run_workload(workload, target, params, checkpoint=checkpoint,
                                                                     progress=progress))
    except NetnsError as e:
        raise LoadError(f"{workload}: {e}") from e


def fill_sync(workload: str, target: Target, params: WorkloadParams, pool: SessionPool,
              progress: Callable[[str], None] | None = None) -> int:
    """Before a phase of a pooled ``workload`` (untimed, before the server's CPU is read):
    make ``pool`` hold ``params.clients`` live sessions to ``target``, kept ones probed,
    missing ones logged in in ``params.login_mode`` (binary for the concurrent transfers).
    Login errors here are not counted: the phase logs in again whatever is still missing
    and counts its errors as it always did. Bounded by ``params.phase_timeout``. Returns the
    sessions held; 0 for a workload that is not pooled.

    Raises:
        PoolUnavailable: the pool's loop could not start.
    """
    if not pooled(workload):
        return 0
    binary = workload in ("retr_concurrent", "stor_concurrent")

    async def fill() -> int:
        raise_nofile_limit()
        ph = Phase(workload, target, params, None, progress)

        async def login(k: int) -> list[FTPSession]:
            ph.progress(f"logging in {k} sessions to keep ({params.login_mode})")
            got = await ph.login_many(k, binary, measured=False)
            ph.sessions.difference_update(got)  # the pool's now
            return got

        with gc_paused():
            try:
                async with asyncio.timeout(params.phase_timeout):
                    return await pool.fill(params.clients, login)
            except TimeoutError:
                log.info("session pool: filling %d sessions took over %g s", params.clients, params.phase_timeout)
                return len(pool)
            finally:
                pool.greeted, pool.late = ph.greeted, ph.late
                ph.close_all()  # sessions in the middle of a login when the bound expired

    return pool.run(fill)
