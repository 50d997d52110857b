"""The profile of a cell's measured phase (runner.metrics.profile) for the cells whose spec
asks for one (runner.spec.profile): which profiler, on which cgroup and process."""
from __future__ import annotations

import logging
from typing import Any

from runner.catalogue.servers import JIT_SERVERS, PYTHON_SERVERS
from runner.metrics.cgroup_cpu import CpuStat
from runner.metrics.profile import PhaseProfiler, ProfilerUnavailable
from runner.metrics.profile_data import ServerProfile
from runner.spec.profile import ProfileSpec

log = logging.getLogger(__name__)


def start_profile(want: ProfileSpec | None, server: str, handle: Any, cgroup: CpuStat | None, *,
                  span: bool = False) -> PhaseProfiler | None:
    """Start the profilers of one phase: py-spy on ``handle.pid`` for a Python server
    (runner.catalogue.servers.PYTHON_SERVERS), perf on the server's cgroup (``cgroup.where``:
    the folder the cell's CPU counters come from; a container's under docker) for the
    others and for the off-CPU and syscall figures of all. With ``span`` perf records only
    the measured span (PhaseProfiler.span_begin / span_end, called by the cell when the
    driver marks it). None when ``want`` is None or no profiler can run (logged: the cell
    runs unprofiled)."""
    if want is None:
        return None
    folder = cgroup.where if cgroup is not None and cgroup.where not in ("", "engine") else None
    prof = PhaseProfiler(handle.pid, folder, python=server in PYTHON_SERVERS, rate_hz=want.rate_hz,
                         off_cpu=want.off_cpu, syscalls=want.syscalls, jit=JIT_SERVERS.get(server))
    try:
        prof.start(span=span)
    except (ProfilerUnavailable, OSError) as exc:
        log.warning("cell not profiled: %s", exc)
        prof.close()
        return None
    return prof


def stop_profile(prof: PhaseProfiler | None) -> ServerProfile | None:
    """The profile of the phase just ended; None without a profiler or when reading it
    failed (logged)."""
    if prof is None:
        return None
    try:
        return prof.stop()
    except Exception as exc:  # noqa: BLE001 - a profiler's failure must not fail the cell
        log.warning("profile not read: %s", exc)
        prof.close()
        return None
