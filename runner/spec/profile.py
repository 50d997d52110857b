"""The ``profile:`` field of a spec, a workload entry or a server entry: whether the
measured phase of a cell runs under a sampling profiler (runner.metrics.profile), and
how. ``true`` is :class:`ProfileSpec` with its defaults; ``false`` turns profiling off
for that entry; absent (None) inherits. The most specific entry wins: a server's, then
a workload's, then the spec's own (:func:`resolve`). Imports only pydantic."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

#: Highest sampling rate, samples per second (perf's default ceiling on this kernel is
#: kernel.perf_event_max_sample_rate; 999 stays far below it and avoids lockstep with 1 kHz timers).
MAX_RATE_HZ = 999


class ProfileSpec(BaseModel):
    """How a cell is profiled.

    Attributes:
        rate_hz: samples per second per CPU, 1..999 (default 99: off the 100 Hz tick).
        off_cpu: record context switches for the off-CPU time and stacks.
        syscalls: count the server's system calls (``perf trace -s``).
    """

    model_config = ConfigDict(extra="forbid")
    rate_hz: int = Field(99, ge=1, le=MAX_RATE_HZ, description="samples per second per CPU, 1..999")
    off_cpu: bool = Field(True, description="off-CPU time and stacks from sched_switch tracepoints")
    syscalls: bool = Field(True, description="syscall counts, errors and time (perf trace -s)")


#: A ``profile:`` value as a spec writes it.
ProfileField = StrictBool | ProfileSpec | None


def normalise(value: Any) -> ProfileSpec | None | bool:
    """``True`` -> ProfileSpec(), a mapping -> ProfileSpec(**mapping), ``False``/None as they are."""
    if value is True:
        return ProfileSpec()
    if isinstance(value, dict):
        return ProfileSpec.model_validate(value)
    return value  # type: ignore[no-any-return]


def resolve(*levels: ProfileField) -> ProfileSpec | None:
    """The profile of a cell from its levels, most specific first (server entry, workload
    entry, spec): the first that is not None decides; ``True`` means the defaults, ``False``
    no profile."""
    for v in levels:
        if v is None:
            continue
        if v is False:
            return None
        return ProfileSpec() if v is True else v
    return None
