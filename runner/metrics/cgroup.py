"""Memory of a cgroup (a server container's): which cgroup a process is in, and its
current, peak and anonymous memory, from the kernel's cgroup files.

Sources: cgroup v2 ``memory.current``, ``memory.peak`` (Linux >= 5.19) and
``memory.stat`` ``anon``; cgroup v1 ``memory.usage_in_bytes``,
``memory.max_usage_in_bytes`` and ``memory.stat`` ``total_rss`` (kernel documentation:
admin-guide/cgroup-v2.rst, admin-guide/cgroup-v1/memory.rst). Where the cgroup files are
not visible (the engine on another host), :func:`from_engine_stats` reads the same
figures from Docker's stats API.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.config import get_settings


def cgroup_dir(pid: int, root: Path | None = None, proc: Path = Path("/proc")) -> tuple[Path, int] | None:
    """The memory cgroup folder of host process ``pid`` and the cgroup version (1 or 2).

    Read from ``<proc>/<pid>/cgroup``: a v1 line naming the ``memory`` controller whose
    folder under ``<root>/memory`` has ``memory.usage_in_bytes``, else the v2 line
    (``0::PATH``) whose folder under ``root`` (or ``root/unified``, the hybrid layout)
    has ``memory.current``. ``root`` defaults to ``Settings.cgroup_root`` (``XFERLAB_CGROUP_ROOT``). Returns None when
    the process is gone or no such folder exists under ``root``."""
    root = root or get_settings().cgroup_root
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    for ln in lines:
        parts = ln.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            d = root / "memory" / parts[2].lstrip("/")
            if (d / "memory.usage_in_bytes").exists():
                return d, 1
    for ln in lines:
        if ln.startswith("0::"):
            rel = ln[3:].lstrip("/")
            for d in (root / rel, root / "unified" / rel):
                if (d / "memory.current").exists():
                    return d, 2
    return None


def read_cgroup_memory(d: Path, version: int) -> dict[str, float]:
    """Memory figures of one cgroup, bytes: ``current`` (usage now, page cache
    included), ``peak`` (highest usage since the cgroup was made; absent on v2 kernels
    without memory.peak), ``anon`` (anonymous memory: v2 memory.stat ``anon``, v1
    ``total_rss``). Raises OSError when the files vanished (container gone), ValueError
    when ``version`` is neither 1 nor 2."""
    if version not in (1, 2):
        raise ValueError(f"cgroup version {version!r}: want 1 or 2")
    out: dict[str, float] = {}
    if version == 2:
        out["current"] = float((d / "memory.current").read_text())
        if (d / "memory.peak").exists():
            out["peak"] = float((d / "memory.peak").read_text())
        stat_key = "anon"
    else:
        out["current"] = float((d / "memory.usage_in_bytes").read_text())
        out["peak"] = float((d / "memory.max_usage_in_bytes").read_text())
        stat_key = "total_rss"
    for ln in (d / "memory.stat").read_text().splitlines():
        k, _, v = ln.partition(" ")
        if k == stat_key:
            out["anon"] = float(v)
    return out


def from_engine_stats(memory_stats: dict[str, Any]) -> dict[str, float]:
    """The same figures from Docker's stats API (``stats()["memory_stats"]``), bytes:
    ``current`` = ``usage``, ``peak`` = ``max_usage`` (cgroup v1 engines only), ``anon``
    = ``stats.anon`` (v2), else ``stats.total_rss`` or ``stats.rss`` (v1). Keys the
    engine does not report are left out."""
    out: dict[str, float] = {}
    if "usage" in memory_stats:
        out["current"] = float(memory_stats["usage"])
    if "max_usage" in memory_stats:
        out["peak"] = float(memory_stats["max_usage"])
    st = memory_stats.get("stats") or {}
    for k in ("anon", "total_rss", "rss"):
        if k in st:
            out["anon"] = float(st[k])
            break
    return out
