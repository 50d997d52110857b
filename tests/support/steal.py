"""The hypervisor's steal time over a block of a test: what a figure that needs the
machine on time (a software shaper's rate) may lose to a host running something else."""
from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType

import psutil


class Steal:
    """``with Steal() as s:``, then ``s.seconds``: the steal time of this machine's CPUs
    (or of the CPUs numbered ``cpus``) over the block, summed (psutil.cpu_times().steal,
    the 8th column of /proc/stat's ``cpu`` lines: time a virtual CPU wanted to run while
    the host ran something else; 0 on bare metal); ``s.wall``: the block's wall time (s);
    ``s.share``: seconds / (wall x CPUs), the share of those CPUs' time lost to the host
    (0.0-1.0)."""

    def __init__(self, cpus: list[int] | None = None) -> None:
        self.cpus = cpus
        self.seconds = 0.0
        self.wall = 0.0
        self._t0 = self._s0 = 0.0

    def _read(self) -> float:
        if self.cpus is None:
            return psutil.cpu_times().steal
        per_cpu = psutil.cpu_times(percpu=True)  # the online CPUs, in ascending number
        online = online_cpus()
        if len(online) != len(per_cpu):
            raise RuntimeError(f"psutil lists {len(per_cpu)} CPUs, the kernel {len(online)} online ({online})")
        missing = sorted(set(self.cpus) - set(online))
        if missing:
            raise ValueError(f"CPUs {missing} are not online (online: {online})")
        return sum(per_cpu[online.index(c)].steal for c in self.cpus)

    def __enter__(self) -> Steal:
        self._s0, self._t0 = self._read(), time.monotonic()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.seconds = max(0.0, self._read() - self._s0)
        self.wall = time.monotonic() - self._t0

    @property
    def ncpus(self) -> int:
        """How many CPUs the figure sums over."""
        return len(self.cpus) if self.cpus is not None else (psutil.cpu_count() or 1)

    @property
    def share(self) -> float:
        return min(1.0, self.seconds / (self.wall * self.ncpus)) if self.wall > 0 else 0.0

    def __str__(self) -> str:
        return f"steal {self.seconds * 1000:.0f} ms of {self.wall:.1f} s x {self.ncpus} CPUs ({self.share:.1%})"


def online_cpus(path: Path = Path("/sys/devices/system/cpu/online")) -> list[int]:
    """The numbers of the online CPUs, ascending, from the kernel's CPU list (``0-1,3``:
    [0, 1, 3]; Documentation/admin-guide/cputopology.rst)."""
    out: list[int] = []
    for part in path.read_text().strip().split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def assert_on_cpu_matches(prof, cpu_s: float, steal: Steal, share: float, samples: int) -> None:
    """A profile's on-CPU seconds (``prof.on_cpu_s``, samples x 1 / ``prof.rate_hz``) against
    the CPU seconds ``cpu_s`` a kernel counter gave for the same processes (a cgroup's
    usage): within ``share`` of ``cpu_s`` plus ``samples`` samples, and above it also the
    host's steal seconds over the run (``steal``): perf's ``cpu-clock`` advances while a
    running task's virtual CPU is stolen, and the scheduler's CPU time does not (with
    steal accounting, clock_task less steal). Raises AssertionError naming the figures."""
    slack = share * cpu_s + samples / prof.rate_hz
    assert -slack <= prof.on_cpu_s - cpu_s <= slack + steal.seconds, (
        f"on-CPU {prof.on_cpu_s:.3f} s from the samples against {cpu_s:.3f} s counted; {steal}")
