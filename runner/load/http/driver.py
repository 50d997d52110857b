"""Driver ``xferlab-http``: xferlab's own asyncio HTTP/1.1 keep-alive load generator
(runner.load.http.client), for the HTTP workloads of the catalogue (seed 002's gobench).

Pure Python on the event loop of runner.load.loop (uvloop by default), so it is
available wherever xferlab is installed; it runs inside ``Target.netns`` when set.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from runner.catalogue.workloads import workloads_of
from runner.load.base import Checkpoint, LoadError, OwnClientDriver, Progress

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.result import PhaseResult
    from runner.load.target import Target


class XferlabHttpDriver(OwnClientDriver):
    """The asyncio HTTP client as a driver (implements runner.load.base.Driver)."""

    name = "xferlab-http"
    protocols: tuple[str, ...] = ("http",)
    #: TLS modes it speaks (runner.load.http.client; runner.catalogue.pairing.tls_pair_skip_reason).
    tls_modes: tuple[str, ...] = ("https",)
    workloads: tuple[str, ...] = workloads_of("http")

    def run(self, workload: str, target: Target, params: WorkloadParams, *,
            checkpoint: Checkpoint | None = None, progress: Progress | None = None) -> PhaseResult:
        """One phase through :func:`runner.load.http.client.run_http` (inside ``target.netns``
        when set). ``checkpoint("loaded")`` is called half-way through the phase, from a
        worker thread (a timed request loop has no untimed moment of full load).

        Raises:
            ValueError: not an HTTP workload, or the target has no HTTP port.
            LoadError: the network namespace cannot be joined, or the download fixture
                cannot be placed (disk error, FTP upload refused).
        """
        from runner.load import loop as event_loop
        from runner.load.http.client import run_http
        from runner.net.netns import NetnsError

        if workload not in self.workloads:
            raise ValueError(f"driver {self.name} runs {', '.join(self.workloads)}, not {workload!r}")
        try:
            return event_loop.run_at(target.netns,
                                     lambda: run_http(workload, target, params, progress, checkpoint))
        except NetnsError as e:
            raise LoadError(f"{workload}: {e}") from e


DRIVER = XferlabHttpDriver()
