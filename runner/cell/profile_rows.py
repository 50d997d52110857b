"""A server profile (runner.metrics.profile_data.ServerProfile) as a ``cell_profile`` row and back.

The store knows nothing of the profilers (docs/architecture.md): this module, above both,
turns the profile a cell runner measured into the row runner.store.profiles saves, and a
stored row back into the same ``ServerProfile`` (``server_profile(profile_row(p)) == p``).
"""
from __future__ import annotations

from runner.metrics.profile_data import ServerProfile, SyscallRow
from runner.store.models import CellProfile
from runner.store.profiles import syscall_rows


def profile_row(profile: ServerProfile) -> CellProfile:
    """The unsaved ``cell_profile`` row of ``profile`` (``cell_id`` set on save).

    Raises ValueError naming the field for a profiler name over 20 characters, a version
    over 80, a rate that is not a positive integer, a negative duration or CPU time, or a
    malformed syscall row (runner.store.profiles.syscall_rows)."""
    if not profile.profiler or len(profile.profiler) > 20:
        raise ValueError(f"profile.profiler: 1 to 20 characters, not {profile.profiler!r}")
    if len(profile.profiler_version) > 80:
        raise ValueError(f"profile.profiler_version: at most 80 characters, not {len(profile.profiler_version)}")
    if isinstance(profile.rate_hz, bool) or not isinstance(profile.rate_hz, int) or profile.rate_hz <= 0:
        raise ValueError(f"profile.rate_hz: a positive integer (samples per second), not {profile.rate_hz!r}")
    for name in ("duration_s", "on_cpu_s", "off_cpu_s"):
        v = getattr(profile, name)
        if v is not None and not v >= 0:
            raise ValueError(f"profile.{name}: a non-negative number of seconds, not {v!r}")
    rows = syscall_rows({"name": r.name, "count": r.count, "total_s": r.total_s, "errors": r.errors}
                        for r in profile.syscalls)
    return CellProfile(profiler=profile.profiler, profiler_version=profile.profiler_version,
                       rate_hz=profile.rate_hz, duration_s=float(profile.duration_s), on_cpu=profile.on_cpu,
                       off_cpu=profile.off_cpu, on_cpu_s=float(profile.on_cpu_s),
                       off_cpu_s=None if profile.off_cpu_s is None else float(profile.off_cpu_s),
                       syscalls=rows, notes=list(profile.notes))


def server_profile(row: CellProfile) -> ServerProfile:
    """The ``ServerProfile`` a stored ``cell_profile`` row holds."""
    return ServerProfile(profiler=row.profiler, profiler_version=row.profiler_version, rate_hz=row.rate_hz,
                         duration_s=row.duration_s, on_cpu=row.on_cpu, off_cpu=row.off_cpu, on_cpu_s=row.on_cpu_s,
                         off_cpu_s=row.off_cpu_s,
                         syscalls=tuple(SyscallRow(name=r["name"], count=int(r["count"]), total_s=r.get("total_s"),
                                                   errors=r.get("errors")) for r in row.syscalls or ()),
                         notes=tuple(str(n) for n in row.notes or ()))
