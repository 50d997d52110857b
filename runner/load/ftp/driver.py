"""Driver ``xferlab-ftp``: xferlab's own asyncio FTP load generator (runner.load).

Runs every workload of the catalogue over FTP (the classic suite of seed 000); pure
Python, so it is available wherever xferlab is installed. Timing method:
:mod:`runner.load.ftp.workloads`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from runner.catalogue.workloads import WORKLOADS
from runner.load.base import Checkpoint, Progress

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.result import PhaseResult
    from runner.load.target import Target


class XferlabFtpDriver:
    """The asyncio FTP client as a driver (implements runner.load.base.Driver)."""

    name = "xferlab-ftp"
    protocols: tuple[str, ...] = ("ftp",)
    #: FTPS modes it speaks (runner.load.ftp.tls; runner.catalogue.pairing.tls_pair_skip_reason).
    tls_modes: tuple[str, ...] = ("explicit", "implicit")
    workloads: tuple[str, ...] = tuple(n for n, w in WORKLOADS.items() if w.protocol == "ftp")

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

    def run(self, workload: str, target: Target, params: WorkloadParams, *,
            checkpoint: Checkpoint | None = None, progress: Progress | None = None) -> PhaseResult:
        """One phase through :func:`runner.load.ftp.workloads.run_workload_sync` (same result,
        same exceptions: ValueError for an unknown workload, LoadError when nothing
        could be measured)."""
        from runner.load.ftp.workloads import run_workload_sync

        return run_workload_sync(workload, target, params, checkpoint=checkpoint, progress=progress)


DRIVER = XferlabFtpDriver()
