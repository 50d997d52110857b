"""One-shot measurements of a process tree (root pid + all descendants, recursive).

Used by the sampler's helper process for periodic samples and by TreeSampler directly
when no helper runs. Everything here tolerates processes vanishing mid-sample.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import psutil


class TreeAccessError(Exception):
    """The root process exists but its memory/CPU cannot be read (message says which
    file and how to fix it: run as the server's user or as root)."""


@dataclass(frozen=True)
class MemSnapshot:
    """Memory of a process tree at one instant.

    Attributes:
        name: checkpoint name ("" for periodic samples).
        t: seconds since the sampler started (time.monotonic based).
        uss: bytes, sum over the tree of psutil ``memory_full_info().uss`` (unique set
            size: private pages, from /proc/PID/smaps_rollup).
        rss_minus_shared: bytes, sum over the tree of ``memory_info().rss - .shared``
            (seed 000's formula: ftpbench reports rss - shared of the server pid; xferlab
            sums it over the whole tree).
        nprocs: processes measured.
        unreadable: processes of the tree that could not be read (access denied) and
            are not in the sums.
    """

    name: str
    t: float
    uss: int
    rss_minus_shared: int
    nprocs: int
    unreadable: int = 0

    def to_dict(self) -> dict:
        """Plain dict of the fields (JSON-friendly)."""
        return asdict(self)


def tree(pid: int) -> list[psutil.Process]:
    """The root process and all its descendants now (empty when the root is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def check_readable(pid: int) -> None:
    """Raise ProcessLookupError if ``pid`` does not exist, TreeAccessError if its
    smaps_rollup/stat cannot be read by this user."""
    try:
        p = psutil.Process(pid)
        p.memory_full_info()
        p.cpu_times()
    except psutil.NoSuchProcess as e:
        raise ProcessLookupError(f"no process with pid {pid}") from e
    except psutil.AccessDenied as e:
        raise TreeAccessError(
            f"cannot read memory of pid {pid} (/proc/{pid}/smaps_rollup: permission denied); "
            f"run xferlab as the server's user or as root") from e


def mem_sample(pid: int, t0: float, name: str = "") -> MemSnapshot:
    """Sum USS and rss - shared over the tree of ``pid`` (re-enumerated now). Processes
    that exit mid-sample are skipped; unreadable ones are counted in ``unreadable``."""
    uss = rms = n = bad = 0
    for p in tree(pid):
        try:
            with p.oneshot():
                if p.status() == psutil.STATUS_ZOMBIE:  # exited, not yet reaped: no memory
                    continue
                mi = p.memory_info()
                fi = p.memory_full_info()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        except psutil.AccessDenied:
            bad += 1
            continue
        uss += fi.uss
        rms += mi.rss - mi.shared
        n += 1
    return MemSnapshot(name, time.monotonic() - t0, uss, rms, n, bad)


def cpu_sample(pid: int) -> tuple[float, float]:
    """CPU seconds (user, system) of the tree of ``pid``: for each live process its own
    user/system time plus ``children_user``/``children_system`` (time of its children
    that exited and were waited for). See TreeSampler.cpu_times for coverage."""
    user = system = 0.0
    for p in tree(pid):
        try:
            ct = p.cpu_times()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        user += ct.user + ct.children_user
        system += ct.system + ct.children_system
    return user, system
