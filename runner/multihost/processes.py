"""Client processes on this machine: the N clients of a workload split across several
load-generator processes, each pinned to its own client CPU, merged as a multi-host
phase is (``client_processes`` in a campaign spec; docs/methodology.md, "Client cost").

One asyncio process drives at most one core: with 300 sessions it can be the bottleneck
before the server is (the table flags such rows client-bound). With more client cores,
``client_processes: N`` runs N ``xferlab loadgen`` processes on this machine with one
common start time, the clients split by :func:`runner.multihost.combine.client_shares`
(single-stream workloads stay in one process), and merges their PhaseResults with
:func:`runner.multihost.combine.combine`, the code that merges client hosts. Each
process joins the server's network namespace when the target has one
(``Target.netns``). The RETR fixture is placed before the processes start, so they do
not race to upload it.

``"auto"`` (the default) is the number of client CPUs
(:meth:`runner.spec.model.CampaignSpec.client_process_count`): the length of the campaign's
client pinning, 1 when the client is not pinned. On the 2-core lab machine (server on
CPU 0, clients on CPU 1) that is 1: the phase runs in the runner's process as before.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from typing import Any

from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.load.registry import DEFAULT_DRIVER
from runner.load.result import PhaseResult
from runner.load.target import Target
from runner.multihost.combine import client_shares, combine, contribution_samples, host_params
from runner.multihost.loadgen import collect_loadgens, loadgen_args
from runner.store.models import Sample

#: Seconds between launching the processes and their common start: a process needs
#: 1.3 s of wall time (0.6 s CPU) to import xferlab on the 2-core lab machine while a
#: test run loaded it (``time .venv/bin/python -m runner.cli loadgen --help``); the
#: margin absorbs more load. A process that starts late reports it (``late_s`` of its
#: ``client_host`` sample), and the merged window runs from the earliest start.
START_DELAY_S = 3.0


def splits(workload: str, clients: int, processes: int) -> bool:
    """True when ``workload`` with ``clients`` clients is split over 2+ of ``processes``:
    only workloads whose clients are divided (catalogue ``client_split == "split"``);
    a single-stream workload stays one stream in one process."""
    if processes < 2 or WORKLOADS[workload].client_split != "split":
        return False
    return sum(1 for s in client_shares(workload, clients, processes) if s) > 1


def run_client_processes(workload: str, target: Target, params: WorkloadParams, processes: int, *,
                         cpus: list[int] | None = None, driver: str = DEFAULT_DRIVER,
                         start_delay: float = START_DELAY_S) -> tuple[PhaseResult, list[Sample]]:
    """Run one phase from ``processes`` local ``xferlab loadgen`` processes and merge it.

    Args:
        workload / target / params: as a driver's ``run``; ``target.netns`` is joined by
            every process.
        processes: how many (>= 2; shares from client_shares, empty shares start none).
        cpus: client CPUs; process i is pinned to ``cpus[i % len(cpus)]`` (None: unpinned).
        driver: the driver each process runs.
        start_delay: seconds from launch to the common start.

    Returns:
        ``(combined PhaseResult, per-process contribution samples)``; the combined result
        carries the busiest process's client utilization.

    Raises:
        runner.multihost.inventory.MultiHostError: no process measured anything (the
            message has each one's cause).
        FTPError / OSError: the RETR fixture could not be placed.
    """
    from runner.load.ftp.fixtures import place_phase_fixture

    place_phase_fixture(workload, target, params)
    shares = client_shares(workload, params.clients, processes)
    tgt: dict[str, Any] = {"host": target.host, "port": target.port, "user": target.user,
                           "password": target.password, "netns": target.netns, "http_port": target.http_port,
                           "tls": asdict(target.tls) if target.tls is not None else None}
    start_at = time.time() + start_delay
    procs = []
    files: list[Any] = []
    try:
        for i, share in enumerate(shares):
            if share == 0:
                continue
            args = loadgen_args(workload, tgt, host_params(workload, params, share, i), start_at=start_at,
                                name=f"process {i + 1}", cpu=[cpus[i % len(cpus)]] if cpus else None,
                                driver=driver)
            # the JSON document goes to a file, not a pipe: through a pipe, documents over its
            # 64 KiB (an HTTP phase's latencies) from a uvloop child arrived cut at 65,536 bytes
            out = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed below, after collect
            files.append(out)
            procs.append((f"process {i + 1}", subprocess.Popen(
                [sys.executable, "-m", "runner.cli", *args, "--no-environment"], stdout=out,
                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)))
        docs, results = collect_loadgens(procs, start_delay + params.phase_timeout + 120.0,
                                         what="client process", stdout_files=dict(zip([n for n, _ in procs], files)))
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        for f in files:
            f.close()
    return combine(results, kind="process"), contribution_samples(docs, results)
