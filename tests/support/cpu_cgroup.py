"""A cgroup v2 of the test's own, whose ``cpu.stat`` counts the CPU time of every process
put in it and of all their descendants, exited ones included: a reference for CPU figures
that does not go through /proc/PID/stat or psutil (the kernel's scheduler accounting,
``usage_usec``, summed by the cgroup)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest


def cgroup2_root(mounts: str = "/proc/self/mounts") -> Path | None:
    """The mount point of the cgroup v2 hierarchy (``/sys/fs/cgroup`` on a pure v2 host,
    ``/sys/fs/cgroup/unified`` on a hybrid one), or None when none is mounted."""
    for line in Path(mounts).read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[2] == "cgroup2":
            return Path(parts[1])
    return None


class CpuCgroup:
    """A fresh cgroup v2 directory ``xferlab-test-PID-N`` under the v2 root.

    Usage::

        with CpuCgroup() as cg:
            cg.add(proc.pid)      # the process and every child it forks from now on
            t0 = cg.usage_s()
            ...
            used = cg.usage_s() - t0

    Skips the test (pytest.skip, with the reason) when the machine has no writable cgroup
    v2 hierarchy (no cgroup2 mount, not root). On exit, processes still in it (only those
    the test put there, and their children) are killed (``cgroup.kill``; on kernels
    before 5.14, moved to the root cgroup) and the directory is removed.
    """

    _count = 0

    def __init__(self) -> None:
        root = cgroup2_root()
        if root is None:
            pytest.skip("no cgroup v2 hierarchy is mounted on this machine (the CPU reference needs one)")
        CpuCgroup._count += 1
        self.root = root
        self.path = root / f"xferlab-test-{os.getpid()}-{CpuCgroup._count}"

    def __enter__(self) -> CpuCgroup:
        try:
            self.path.mkdir()
        except PermissionError:
            pytest.skip(f"cannot make a cgroup under {self.root} (needs root)")
        return self

    def add(self, pid: int) -> None:
        """Move process ``pid`` into the cgroup (its later children are born in it)."""
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def usage_s(self) -> float:
        """CPU seconds (user + system) used in the cgroup since it was made: ``cpu.stat``
        ``usage_usec`` / 1e6."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, val = line.partition(" ")
            if key == "usage_usec":
                return int(val) / 1e6
        raise RuntimeError(f"{self.path}/cpu.stat has no usage_usec")

    def __exit__(self, *exc: object) -> None:
        kill = self.path / "cgroup.kill"
        if kill.exists():
            kill.write_text("1\n")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            left = (self.path / "cgroup.procs").read_text().split()
            for pid in [] if kill.exists() else left:
                try:
                    (self.root / "cgroup.procs").write_text(f"{pid}\n")
                except (ProcessLookupError, OSError):
                    pass  # exited meanwhile
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.05)  # a process still leaving
        raise RuntimeError(f"cgroup {self.path} could not be removed")
