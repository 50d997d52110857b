"""The cell watchdog: an overall time bound on one cell, so a stage that hangs (a server
that stops answering in a way no inner timeout catches, a stuck system call) fails the
cell instead of the campaign.

Design (Python cannot kill a thread):

* the cell runs in a worker thread (``xferlab-cell``, one for all cells: a server
  started with PR_SET_PDEATHSIG dies with the thread that started it); the campaign
  loop's thread waits for the cell for at most the cell's bound (:func:`cell_bound_s`);
* the cell reports its stage (runner.cell.local.StageClock calls :meth:`CellWatchdog.enter`)
  and its server handle (:meth:`CellWatchdog.watch`);
* when the bound passes, the watchdog stops the server (``handle.stop()``: the process
  or container is killed and removed, which closes its sockets, so reads blocked on it
  return and clients talking to it exit), raises :class:`CellExpired` in the worker
  thread (it takes effect at the worker's next Python instruction: a sleep, a poll, a
  read that returned), waits :data:`UNBLOCK_GRACE_S` for the worker to unwind, and
  returns a ``failed`` outcome naming the stage that hung. That worker thread gets no
  more cells (a new one runs the next); one that still has not returned is left behind
  (a daemon thread: it cannot outlive the process) and the campaign goes on;
* the server is stopped once: whichever of the watchdog and the worker's own cleanup
  claims it first (:meth:`CellWatchdog.claim_stop`) stops it; a server of an expired
  cell is never handed back to a server pool;
* an interrupt of the campaign loop (Ctrl-C, SIGTERM as KeyboardInterrupt) while it
  waits is passed on to the worker (the same exception raised there), whose cleanup
  runs (clients killed, server stopped) within :data:`UNBLOCK_GRACE_S`, then re-raised.
"""
from __future__ import annotations

import ctypes
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

#: Seconds the watchdog waits for the worker to unwind after the server was stopped.
UNBLOCK_GRACE_S = 10.0
#: Seconds a watchdog's ``handle.stop()`` may take before it is left running.
STOP_BOUND_S = 120.0
#: Fixture bytes per second assumed when bounding a cell (fixtures are written untimed).
FIXTURE_RATE = 50e6


class CellExpired(Exception):
    """Raised in a cell's worker thread when its watchdog's bound passed."""


def cell_bound_s(phase_timeout: float, ready_timeout: float | None, allowance: float,
                 fixture_bytes: int = 0) -> float:
    """A cell's overall bound, seconds: the backend's ``ready_timeout`` (None: the
    server's start is left to the allowance), the warm-up and the measured phase
    (``phase_timeout`` each), the untimed writing of ``fixture_bytes`` of fixtures at
    :data:`FIXTURE_RATE`, and ``allowance`` (server start, checks, sync, counters, the
    stored-file checks, the server's stop: ``Settings.cell_allowance``)."""
    return (ready_timeout or 0.0) + 2 * phase_timeout + allowance + fixture_bytes / FIXTURE_RATE


def _raise_in(thread: threading.Thread, exc: type[BaseException]) -> None:
    """Raise ``exc`` in ``thread`` at its next Python instruction (CPython API)."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exc))


class CellWatchdog:
    """The watchdog of one cell (module docstring). ``bound_s``: the cell's bound (s),
    ``explain``: how it was derived (shown in the reason). Raises ValueError for a bound
    that is not positive."""

    def __init__(self, bound_s: float, explain: str = "") -> None:
        if not bound_s > 0:
            raise ValueError(f"cell watchdog: bound must be > 0 seconds, got {bound_s!r}")
        self.bound_s = float(bound_s)
        self.explain = explain
        self.stage = "not started"
        self.handle: Any = None
        self.expired = threading.Event()
        self._lock = threading.Lock()
        self._stop_claimed = False

    def enter(self, stage: str) -> None:
        """The cell is now in ``stage`` (a runner.catalogue.stages.STAGES key, or ``after X``)."""
        self.stage = stage

    def watch(self, handle: Any) -> None:
        """The cell's server (a ServerHandle): stopped by the watchdog when it fires."""
        self.handle = handle

    def claim_stop(self) -> bool:
        """True for the first caller only: that one stops the server."""
        with self._lock:
            if self._stop_claimed:
                return False
            self._stop_claimed = True
            return True

    def run(self, cell: Callable[[], Any], on_expiry: Callable[[str], Any]) -> Any:
        """Run ``cell()`` in the cell thread within the bound; returns what it returned
        (an exception it raised is re-raised here), or, when the bound passed,
        ``on_expiry(reason)`` (the reason names the stage and the bound)."""
        runner = _CellThread.current()
        box: dict[str, Any] = {}
        done = runner.submit(cell, box)
        try:
            done.wait(self.bound_s)
        except BaseException as exc:  # Ctrl-C / SIGTERM while waiting: the cell cleans up
            _CellThread.abandon(runner)
            _raise_in(runner.thread, type(exc))
            done.wait(UNBLOCK_GRACE_S)
            raise
        if done.is_set():
            if "exc" in box:
                raise box["exc"]
            return box["out"]
        _CellThread.abandon(runner)  # the next cell gets a fresh thread
        stage = self.stage
        self.expired.set()
        reason = (f"cell watchdog: stage {stage!r} still running after {round(self.bound_s, 1):g} s"
                  + (f" (bound: {self.explain})" if self.explain else "") + "; server stopped")
        log.warning("%s", reason)
        self._stop_server()
        if stage != "stop":  # a stop in progress is left to finish
            _raise_in(runner.thread, CellExpired)
        if not done.wait(UNBLOCK_GRACE_S):
            log.warning("cell watchdog: the cell's thread did not return within %g s; left behind", UNBLOCK_GRACE_S)
        return on_expiry(reason)

    def _stop_server(self) -> None:
        handle = self.handle
        if handle is None or not self.claim_stop():
            return
        stopper = threading.Thread(target=_stop_quietly, args=(handle,), name="xferlab-cell-stop", daemon=True)
        t0 = time.monotonic()
        stopper.start()
        stopper.join(STOP_BOUND_S)
        if stopper.is_alive():
            log.warning("cell watchdog: server stop still running after %.0f s; left behind", time.monotonic() - t0)


class _CellThread:
    """The daemon thread that runs cells one after another. One thread for all cells,
    not one per cell: a server started with PR_SET_PDEATHSIG (runner.backends.local)
    is killed when the *thread* that started it exits, and a server kept for reuse
    (runner.cell.server_reuse) outlives its cell. A thread whose cell expired is abandoned
    and the next cell gets a new one."""

    _live: _CellThread | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[tuple[Callable[[], Any], dict[str, Any], threading.Event]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="xferlab-cell", daemon=True)
        self.thread.start()

    @classmethod
    def current(cls) -> _CellThread:
        """The live cell thread (started when none is)."""
        with cls._lock:
            if cls._live is None or not cls._live.thread.is_alive():
                cls._live = _CellThread()
            return cls._live

    @classmethod
    def abandon(cls, runner: _CellThread) -> None:
        """Never give ``runner`` another cell."""
        with cls._lock:
            if cls._live is runner:
                cls._live = None

    def submit(self, fn: Callable[[], Any], box: dict[str, Any]) -> threading.Event:
        """Queue ``fn``; its result goes to ``box["out"]`` (or ``box["exc"]``), then the
        returned event is set."""
        done = threading.Event()
        self.jobs.put((fn, box, done))
        return done

    def _loop(self) -> None:
        while True:
            fn, box, done = self.jobs.get()
            try:
                box["out"] = fn()
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                box["exc"] = exc
            done.set()


def _stop_quietly(handle: Any) -> None:
    try:
        handle.stop()
    except Exception as exc:  # noqa: BLE001 - the cell is already failed
        log.warning("cell watchdog: server stop failed: %s", exc)
