"""Driver ``xferlab-ftp``: xferlab's own asyncio FTP load generator (runner.load).

Runs every workload of the catalogue over FTP (the classic suite of seed 000); pure
Python, so it is available wherever xferlab is installed. Timing method:
:mod:`runner.load.ftp.workloads`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from runner.catalogue.workloads import workloads_of
from runner.load.base import Checkpoint, OwnClientDriver, Progress

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.result import PhaseResult
    from runner.load.target import Target


class XferlabFtpDriver(OwnClientDriver):
    """The asyncio FTP client as a driver (implements runner.load.base.Driver)."""

    name = "xferlab-ftp"
    protocols: tuple[str, ...] = ("ftp",)
    #: FTPS modes it speaks (runner.load.ftp.tls; runner.catalogue.pairing.tls_pair_skip_reason).
    tls_modes: tuple[str, ...] = ("explicit", "implicit")
    workloads: tuple[str, ...] = workloads_of("ftp")
    #: ``run`` marks its measured span with MEASURE_BEGIN / MEASURE_END (runner.load.base).
    measure_events = True

    def run(self, workload: str, target: Target, params: WorkloadParams, *,
            checkpoint: Checkpoint | None = None, progress: Progress | None = None) -> PhaseResult:
        """One phase through :func:`runner.load.ftp.workloads.run_workload_sync` (same result,
        same exceptions: ValueError for an unknown workload, LoadError when nothing
        could be measured)."""
        from runner.load.ftp.workloads import run_workload_sync

        return run_workload_sync(workload, target, params, checkpoint=checkpoint, progress=progress)


DRIVER = XferlabFtpDriver()
