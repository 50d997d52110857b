"""A cgroup v2 of its own for a local server's process tree, so that its CPU time is the
cgroup's counters (runner.metrics.cgroup_cpu) rather than a sum over live processes.

The lab makes a child cgroup before it starts the server; the server process joins it
between fork and exec (it writes ``0`` to the child's ``cgroup.procs``,
:func:`join_in_child`), so every process it forks later is born inside it. Where it is
made, first that works:

1. ``<v2 root>/xferlab.slice/server-<pid>-<n>`` (root: the v2 root is writable);
2. ``<own cgroup>/xferlab-servers/server-<pid>-<n>`` (a delegated subtree: this process's own
   cgroup is writable by its user, as systemd's ``Delegate=yes`` leaves it).

With neither (no v2 hierarchy mounted, not root and no delegation), :func:`make` raises
:class:`NoServerCgroup` with the reason, and the cell's server CPU is the process-tree
figure, recorded as such (docs/methodology.md, "What server CPU counts"). No controller
is enabled: ``cpu.stat`` ``usage_usec``, ``user_usec`` and ``system_usec`` exist in every
v2 cgroup (kernel documentation, admin-guide/cgroup-v2.rst, "Core Interface Files" and
"cpu.stat").
"""
from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

from runner.metrics.cgroup_cpu import CpuCgroup, v2_root

SLICE = "xferlab.slice"
DELEGATED = "xferlab-servers"
#: An empty server cgroup older than this (seconds) is a leftover of a killed run and removed.
STALE_S = 600.0
_seq = itertools.count(1)


class NoServerCgroup(Exception):
    """No cgroup can be made for the server here; ``str(exc)`` says why (no v2 hierarchy,
    not writable as this user, no delegation)."""


class ServerCgroup:
    """A cgroup v2 made for one local server: ``path`` (its folder), ``cpu`` (a
    :class:`CpuCgroup` to read its counters). :meth:`contains` checks a pid is in it;
    :meth:`remove` deletes it once its processes are gone."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cpu = CpuCgroup(path, 2)

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


def make(root: Path | None = None, proc: Path = Path("/proc")) -> ServerCgroup:
    """Make a new, empty cgroup for a server (see the module docstring for where).

    ``root`` defaults to ``Settings.cgroup_root`` (``XFERLAB_CGROUP_ROOT``).
    Raises NoServerCgroup with every reason when none can be made."""
    v2 = v2_root(root)
    if v2 is None:
        raise NoServerCgroup(f"no cgroup v2 hierarchy under {root or 'the cgroup root'} (a v1-only host)")
    reasons = []
    parents = [v2 / SLICE]
    own = _own_cgroup(v2, proc)
    if own is not None and own != v2:
        parents.append(own / DELEGATED)
    name = f"server-{os.getpid()}-{next(_seq)}"
    for parent in parents:
        try:
            parent.mkdir(exist_ok=True)
            _clean_stale(parent)
            d = parent / name
            d.mkdir()
        except OSError as e:
            reasons.append(f"{parent}: {e.strerror or e}")
            continue
        if not os.access(d / "cgroup.procs", os.W_OK) or not (d / "cpu.stat").exists():
            reasons.append(f"{d}: cgroup.procs not writable or no cpu.stat")
            try:
                d.rmdir()
            except OSError:
                pass
            continue
        return ServerCgroup(d)
    raise NoServerCgroup("cannot make a cgroup v2 for the server (not root and no delegated subtree): "
                         + "; ".join(reasons))


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
