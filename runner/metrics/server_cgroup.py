"""A cgroup of its own (v2, or v1 ``cpuacct``) for a local server's process tree, so that
its CPU time is the cgroup's counters (runner.metrics.cgroup_cpu) rather than a sum over
live processes.

The lab makes a child cgroup before it starts the server; the server process joins it
between fork and exec (it writes ``0`` to the child's ``cgroup.procs``,
:func:`join_in_child`), so every process it forks later is born inside it. Where it is
made, first that works:

1. ``<v2 root>/xferlab.slice/server-<pid>-<n>`` (root: the v2 root is writable);
2. ``<own cgroup>/xferlab-servers/server-<pid>-<n>`` (a delegated subtree: this process's own
   cgroup is writable by its user, as systemd's ``Delegate=yes`` leaves it).

3. on a host without a usable v2 hierarchy (cgroup v1 only, as Docker's ``cgroupfs``
   driver on v1 hosts), ``<v1 cpuacct mount>/xferlab.slice/server-<pid>-<n>`` (root: the
   ``cpuacct`` controller's hierarchy, mounted as ``cpuacct`` or ``cpu,cpuacct``, is
   writable).

With none of them (not root and no delegation), :func:`make` raises
:class:`NoServerCgroup` with the reason, and the cell's server CPU is the process-tree
figure, recorded as such (docs/methodology.md, "What server CPU counts"). No controller
is enabled: ``cpu.stat`` ``usage_usec``, ``user_usec`` and ``system_usec`` exist in every
v2 cgroup (kernel documentation, admin-guide/cgroup-v2.rst, "Core Interface Files" and
"cpu.stat"); a v1 ``cpuacct`` cgroup has ``cpuacct.usage``, ``cpuacct.usage_user`` and
``cpuacct.usage_sys`` in nanoseconds (admin-guide/cgroup-v1/cpuacct.rst). Writing ``0``
to ``cgroup.procs`` moves the writer in both versions.
"""
from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from runner.config import get_settings
from runner.metrics.cgroup_cpu import V1_CPUACCT_MOUNTS, CpuCgroup, v2_root

SLICE = "xferlab.slice"
DELEGATED = "xferlab-servers"
#: An empty server cgroup older than this (seconds) is a leftover of a killed run and removed.
STALE_S = 600.0
_seq = itertools.count(1)


class NoServerCgroup(Exception):
    """No cgroup can be made for the server here; ``str(exc)`` says why (no v2 hierarchy,
    not writable as this user, no delegation)."""


class ServerCgroup:
    """A cgroup made for one local server: ``path`` (its folder), ``cpu`` (a
    :class:`CpuCgroup` to read its counters; ``version`` 2, or 1 for a v1 ``cpuacct``
    cgroup). :meth:`contains` checks a pid is in it;
    :meth:`remove` deletes it once its processes are gone."""

    def __init__(self, path: Path, version: int = 2) -> None:
        self.path = path
        self.cpu = CpuCgroup(path, version)

    @property
    def procs_file(self) -> str:
        """The ``cgroup.procs`` file a process writes ``0`` to, to join."""
        return str(self.path / "cgroup.procs")

    def contains(self, pid: int) -> bool:
        """True when process ``pid`` is in this cgroup now (its ``cgroup.procs`` lists it)."""
        try:
            return str(pid) in (self.path / "cgroup.procs").read_text().split()
        except OSError:
            return False

    def remove(self, timeout: float = 2.0) -> bool:
        """Delete the cgroup (rmdir), retrying while exiting processes leave it, at most
        ``timeout`` seconds. Returns True when it is gone; a cgroup still holding a process
        is left in place (rmdir fails with EBUSY), and removed by a later :func:`make`."""
        deadline = time.monotonic() + timeout
        for _ in range(100):
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)
        return False


def _own_cgroup(v2: Path, proc: Path) -> Path | None:
    try:
        for ln in (proc / "self" / "cgroup").read_text().splitlines():
            if ln.startswith("0::"):
                return v2 / ln[3:].strip("/")
    except OSError:
        return None
    return None


def _clean_stale(parent: Path) -> None:
    """Remove empty server cgroups of ``parent`` left by runs that were killed (older than
    :data:`STALE_S`; rmdir refuses a cgroup that still holds a process)."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    now = time.time()
    for d in entries[:1000]:
        try:
            if d.is_dir() and d.name.startswith("server-") and now - d.stat().st_mtime > STALE_S:
                d.rmdir()
        except OSError:
            continue


def _v1_cpuacct(root: Path) -> Path | None:
    """The v1 hierarchy with the ``cpuacct`` controller under ``root`` (mounted alone or
    with ``cpu``), or None."""
    for mount in V1_CPUACCT_MOUNTS:
        d = root / mount
        if (d / "cpuacct.usage").exists() and (d / "cgroup.procs").exists():
            return d
    return None


def _try_make(parent: Path, name: str, counters: str, reasons: list[str]) -> Path | None:
    """``parent/name`` made, with ``cgroup.procs`` writable and ``counters`` present;
    None (the reason appended to ``reasons``) when it cannot be."""
    try:
        parent.mkdir(exist_ok=True)
        _clean_stale(parent)
        d = parent / name
        d.mkdir()
    except OSError as e:
        reasons.append(f"{parent}: {e.strerror or e}")
        return None
    if not os.access(d / "cgroup.procs", os.W_OK) or not (d / counters).exists():
        reasons.append(f"{d}: cgroup.procs not writable or no {counters}")
        try:
            d.rmdir()
        except OSError:
            pass
        return None
    return d


def make(root: Path | None = None, proc: Path = Path("/proc")) -> ServerCgroup:
    """Make a new, empty cgroup for a server (see the module docstring for where: v2 as
    root, v2 delegated, then v1 ``cpuacct`` as root).

    ``root`` defaults to ``Settings.cgroup_root`` (``XFERLAB_CGROUP_ROOT``).
    Raises NoServerCgroup with every reason when none can be made."""
    root = root or get_settings().cgroup_root
    reasons: list[str] = []
    name = f"server-{os.getpid()}-{next(_seq)}"
    v2 = v2_root(root)
    if v2 is None:
        reasons.append(f"no cgroup v2 hierarchy under {root}")
    else:
        parents = [v2 / SLICE]
        own = _own_cgroup(v2, proc)
        if own is not None and own != v2:
            parents.append(own / DELEGATED)
        for parent in parents:
            d = _try_make(parent, name, "cpu.stat", reasons)
            if d is not None:
                return ServerCgroup(d, 2)
    v1 = _v1_cpuacct(root)
    if v1 is None:
        reasons.append(f"no cgroup v1 cpuacct hierarchy under {root}")
    else:
        d = _try_make(v1 / SLICE, name, "cpuacct.usage", reasons)
        if d is not None:
            return ServerCgroup(d, 1)
    raise NoServerCgroup("no cgroup can be made for the server here (v2 as root or in a delegated subtree, "
                         "v1 cpuacct as root): " + "; ".join(reasons))


def join_in_child(procs_file: str) -> None:
    """Move the calling process into the cgroup whose ``cgroup.procs`` is ``procs_file``
    (write ``0``). For a child between fork and exec; errors are swallowed: the parent
    checks membership afterwards (:meth:`ServerCgroup.contains`) and falls back."""
    try:
        fd = os.open(procs_file, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)
    except OSError:
        pass
