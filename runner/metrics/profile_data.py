"""A CPU profile of the server under test over one measured phase, as the lab stores it.

The profilers (Linux ``perf`` for native servers, ``py-spy`` for Python ones) write their
samples as *folded stacks*: one line per distinct stack, frames from the root to the leaf
joined by ``;``, then a space and the number of samples, e.g.
``vsftpd;main;do_sendfile;[k] tcp_sendmsg 42`` (Brendan Gregg's format, the input of
``flamegraph.pl`` and of inferno). Kernel frames carry the ``[k]`` prefix.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class SyscallRow:
    """One system call of the server during the phase.

    Attributes:
        name: the call's name, e.g. ``sendfile``, ``epoll_wait``.
        count: calls made.
        total_s: time spent in the call, seconds (None when the tracer gives counts only).
        errors: calls that returned an error (e.g. ``-EAGAIN``); None when unknown.
    """

    name: str
    count: int
    total_s: float | None = None
    errors: int | None = None


@dataclass(frozen=True)
class ServerProfile:
    """The profile of one cell's measured phase.

    Attributes:
        profiler: ``perf`` or ``py-spy``.
        profiler_version: the profiler's own version string.
        rate_hz: sampling frequency, samples per second per CPU.
        duration_s: seconds the profiler ran (the measured phase).
        on_cpu: folded stacks of on-CPU samples (lines ``frame;frame;... N``).
        off_cpu: folded stacks of off-CPU time (weights in microseconds), or None.
        on_cpu_s: CPU seconds the samples stand for (samples / rate_hz).
        off_cpu_s: seconds the server's threads spent blocked, or None when not measured.
        syscalls: the server's system calls during the phase, most time (or count) first.
        notes: what the profile could not see (unresolved JIT frames, no off-CPU
            tracepoints, a process that ended before it was attached), one line each.
    """

    profiler: str
    profiler_version: str
    rate_hz: int
    duration_s: float
    on_cpu: str
    off_cpu: str | None = None
    on_cpu_s: float = 0.0
    off_cpu_s: float | None = None
    syscalls: tuple[SyscallRow, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def profile_to_dict(profile: ServerProfile) -> dict[str, Any]:
    """``profile`` as a JSON-ready dict (the dataclass's fields; ``syscalls`` a list of
    dicts of SyscallRow's fields): what ``xferlab serve`` sends for a cell across hosts."""
    return asdict(profile)


def profile_from_dict(data: Any) -> ServerProfile:
    """The ServerProfile of :func:`profile_to_dict`'s dict. Raises ValueError naming the
    field when a field is missing or of the wrong type, or another field is present."""
    if not isinstance(data, dict):
        raise ValueError(f"profile: want an object, got {type(data).__name__}")
    want: dict[str, tuple[type, ...]] = {
        "profiler": (str,), "profiler_version": (str,), "rate_hz": (int,), "duration_s": (int, float),
        "on_cpu": (str,), "off_cpu": (str, type(None)), "on_cpu_s": (int, float),
        "off_cpu_s": (int, float, type(None)), "syscalls": (list,), "notes": (list,)}
    extra = sorted(set(data) - set(want))
    if extra:
        raise ValueError(f"profile: unknown field(s) {extra}")
    for name, types in want.items():
        if name not in data:
            raise ValueError(f"profile: field {name!r} missing")
        if not isinstance(data[name], types) or isinstance(data[name], bool):
            raise ValueError(f"profile: field {name!r} is {type(data[name]).__name__}")
    rows = []
    for i, r in enumerate(data["syscalls"]):
        if not (isinstance(r, dict) and set(r) == {"name", "count", "total_s", "errors"}
                and isinstance(r["name"], str) and isinstance(r["count"], int)
                and (r["total_s"] is None or isinstance(r["total_s"], (int, float)))
                and (r["errors"] is None or isinstance(r["errors"], int))):
            raise ValueError(f"profile: syscalls[{i}] is not a syscall row")
        rows.append(SyscallRow(r["name"], r["count"], r["total_s"], r["errors"]))
    if not all(isinstance(n, str) for n in data["notes"]):
        raise ValueError("profile: notes must be strings")
    return ServerProfile(data["profiler"], data["profiler_version"], data["rate_hz"], float(data["duration_s"]),
                         data["on_cpu"], data["off_cpu"], float(data["on_cpu_s"]),
                         None if data["off_cpu_s"] is None else float(data["off_cpu_s"]), tuple(rows),
                         tuple(data["notes"]))
