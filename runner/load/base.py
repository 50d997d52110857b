"""The driver contract: a *driver* turns (workload, params, target) into a PhaseResult.

A driver is one way of making load: xferlab's own asyncio FTP and HTTP clients
(:mod:`runner.load.ftp.driver`, :mod:`runner.load.http.driver`) and real client programs
(lftp, wget, curl, wrk, h2load: :mod:`runner.load.tools`). Each is listed once in the
registry (:mod:`runner.load.registry`). The cell runners (runner.cell.local,
runner.cell.remote) and ``xferlab loadgen`` only call :meth:`Driver.check` and
:meth:`Driver.run`; they never import a driver's internals.

This module imports nothing heavy (no asyncio client, no subprocess), so the spec can
validate ``driver:`` cheaply.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: drivers must not depend on the backends at import time
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.result import PhaseResult
    from runner.load.target import Target

#: Called with a checkpoint name: ``"loaded"`` at an untimed moment of maximum load, and, from
#: drivers whose ``measure_events`` is true, :data:`MEASURE_BEGIN` just before the measured
#: span starts and :data:`MEASURE_END` just after it ends (outside the span: the callee may
#: block briefly, e.g. to read the server's CPU counters or switch a profiler).
Checkpoint = Callable[[str], None]
#: Checkpoint names around the measured span (the clocks a phase's figures are taken over,
#: after its untimed set-up such as logging in idle sessions, before its untimed teardown).
MEASURE_BEGIN = "measure:begin"
MEASURE_END = "measure:end"
#: Called with one-line human progress messages.
Progress = Callable[[str], None]


class DriverUnavailable(Exception):
    """The driver cannot run on this host; ``str(exc)`` is the reason to record the cell
    as skipped, e.g. ``"curl: binary not found in PATH; apt-get install curl"``."""


class LoadError(Exception):
    """Nothing could be measured: no session ever logged in and no operation timed out
    (e.g. the first connect was refused, or the password was rejected). The message
    names ``host:port`` and the cause."""


class Driver(Protocol):
    """One way of making load.

    Attributes:
        name: registry name, as written in a spec's ``driver:`` (e.g. ``"xferlab-ftp"``).
        protocols: protocols it speaks (``"ftp"``, ``"http"``).
        workloads: names of runner.catalogue.workloads.WORKLOADS it can run.
    """

    name: str
    protocols: tuple[str, ...]
    workloads: tuple[str, ...]

    def check(self) -> None:
        """Return when the driver can run here; raise DriverUnavailable with a clear
        reason (missing binary or library, naming how to get it) otherwise."""
        ...

    def version(self) -> str:
        """Version of what makes the load (the client program's, or xferlab's own)."""
        ...

    # Optional (looked up with getattr): ``refuses(workload, params) -> str | None``, why the
    # driver cannot run ``workload`` with these parameters (h2load: PUT uploads), checked by
    # the campaign spec; ``details() -> dict[str, str]``, extra items of the driver record;
    # ``measure_events: bool``, true when ``run`` calls ``checkpoint`` with MEASURE_BEGIN and
    # MEASURE_END around its measured span (in the calling process).

    def run(self, workload: str, target: Target, params: WorkloadParams, *,
            checkpoint: Checkpoint | None = None, progress: Progress | None = None) -> PhaseResult:
        """Run one measured phase of ``workload`` against ``target`` and return what it
        measured (units as runner.load.result). Failed operations are counted in the
        result, not raised.

        Raises:
            ValueError: a workload this driver does not run.
            LoadError: nothing could be measured (e.g. connection refused).
        """
        ...


class OwnClientDriver:
    """What xferlab's own clients (``xferlab-ftp``, ``xferlab-http``) share as drivers: always
    available, versioned as xferlab, and run on runner.load.loop's event loop. Subclasses
    set ``name``, ``protocols``, ``workloads`` and implement ``run`` (:class:`Driver`)."""

    def check(self) -> None:
        """Always available: the client is part of xferlab."""

    def version(self) -> str:
        """xferlab's installed version (the client ships with it)."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("xferlab")
        except PackageNotFoundError:  # pragma: no cover - source checkout without install
            return "0+unknown"

    def details(self) -> dict[str, str]:
        """``{"event_loop": "uvloop" | "asyncio"}``: the loop the phases run on
        (runner.load.loop.loop_name; raises ValueError for a bad XFERLAB_EVENT_LOOP)."""
        from runner.load.loop import loop_name

        return {"event_loop": loop_name()}
