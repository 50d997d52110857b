"""CPU time of a cgroup: a server container's, or the one the lab makes for a local
server's process tree, read from the kernel's counters in microseconds.

Why a cgroup and not the process tree: a cgroup's CPU counters keep the time of every
task that ran in it, including processes that exited or were re-parented before the
phase ended; a sum over the live processes of a tree loses the time of a process that
exits unwaited-for (its parent exits first or never waits; it is then reaped by init or a
subreaper) and of one that was alive at the start sample and gone at the end one
(docs/methodology.md, "What server CPU counts").

Sources (kernel documentation, admin-guide/cgroup-v2.rst "cpu.stat";
admin-guide/cgroup-v1/cpuacct.rst; scheduler/sched-bwc.rst):

* cgroup v2 ``cpu.stat``: ``usage_usec``, ``user_usec``, ``system_usec`` (always
  present), ``nr_throttled`` and ``throttled_usec`` (with the ``cpu`` controller
  enabled for the cgroup);
* cgroup v1 ``cpuacct.usage`` (nanoseconds, the scheduler's exact runtime), split into
  user and system in the proportion of ``cpuacct.usage_user`` to ``cpuacct.usage_sys``
  (or, on kernels without those, of ``cpuacct.stat``'s ``user`` and ``system`` ticks),
  so that the two add up to the usage, as the kernel scales a task's tick samples to its
  runtime for ``/proc/PID/stat`` (kernel/sched/cputime.c, ``cputime_adjust``). The
  per-mode counters alone are tick samples (kernel/sched/cpuacct.c reads them from the
  per-CPU ``kcpustat``) and do not add up to the usage: four workers that burnt 1.0 s
  read 0.23 s user and 0.63 s system for a usage of 1.03 s on this lab's 6.18 kernel.
  And the ``cpu`` controller's ``cpu.stat`` ``nr_throttled`` and ``throttled_time``
  (nanoseconds);
* Docker's stats API ``cpu_stats`` (nanoseconds), where the cgroup files are not visible.

On a hybrid host (v1 controllers and the v2 hierarchy at ``<root>/unified``) a
container is in both: the v2 ``cpu.stat`` gives usage, user and system, the v1 ``cpu``
controller the throttling.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from runner.config import get_settings

#: Folder names under the cgroup root of a v1 hierarchy with the ``cpuacct`` controller
#: (mounted alone, or with ``cpu`` as systemd and Docker hosts do).
V1_CPUACCT_MOUNTS: tuple[str, ...] = ("cpuacct", "cpu,cpuacct", "cpuacct,cpu")


@dataclass(frozen=True)
class CpuStat:
    """CPU counters of a cgroup at one instant, or their difference over a phase.

    Attributes:
        usage_usec: CPU time of all its tasks, microseconds (user + system).
        user_usec: of which in user mode, microseconds.
        system_usec: of which in kernel mode, microseconds.
        nr_throttled: CFS periods in which the cgroup was throttled by a CPU limit.
        throttled_usec: time its tasks were throttled, microseconds.
        where: what was read: the cgroup folder, or ``engine`` (Docker's stats API).
    """

    usage_usec: int
    user_usec: int
    system_usec: int
    nr_throttled: int = 0
    throttled_usec: int = 0
    where: str = ""

    def since(self, before: CpuStat) -> CpuStat:
        """The counters over the span from ``before`` to this reading (each clamped at 0)."""
        return CpuStat(max(0, self.usage_usec - before.usage_usec), max(0, self.user_usec - before.user_usec),
                       max(0, self.system_usec - before.system_usec),
                       max(0, self.nr_throttled - before.nr_throttled),
                       max(0, self.throttled_usec - before.throttled_usec), self.where)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (JSON-friendly)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> CpuStat:
        """The CpuStat of :meth:`to_dict`'s dict. Raises ValueError when a field is missing
        or of the wrong type, or another field is present."""
        ints = ("usage_usec", "user_usec", "system_usec", "nr_throttled", "throttled_usec")
        if not isinstance(data, dict) or set(data) != {*ints, "where"}:
            raise ValueError(f"cgroup CPU counters: want the fields {[*ints, 'where']}, got {data!r:.200}")
        if not all(type(data[k]) is int and data[k] >= 0 for k in ints) or not isinstance(data["where"], str):
            raise ValueError(f"cgroup CPU counters: want non-negative integers and a folder, got {data!r:.200}")
        return cls(usage_usec=data["usage_usec"], user_usec=data["user_usec"], system_usec=data["system_usec"],
                   nr_throttled=data["nr_throttled"], throttled_usec=data["throttled_usec"], where=data["where"])


@dataclass(frozen=True)
class CpuCgroup:
    """Where a cgroup's CPU counters are: ``acct`` (the folder with v2 ``cpu.stat`` or
    v1 ``cpuacct.usage``), ``version`` of that folder (2 or 1), and ``throttle`` (a v1
    ``cpu`` controller folder with ``cpu.stat``, for the throttling counters) or None."""

    acct: Path
    version: int
    throttle: Path | None = None

    def read(self) -> CpuStat:
        """The counters now (:class:`CpuStat`). Raises OSError when the files vanished
        (the cgroup was removed), ValueError on a malformed file."""
        if self.version == 2:
            kv = _keyed(self.acct / "cpu.stat")
            stat = CpuStat(kv["usage_usec"], kv.get("user_usec", 0), kv.get("system_usec", 0),
                           kv.get("nr_throttled", 0), kv.get("throttled_usec", 0), str(self.acct))
        else:
            usage = int((self.acct / "cpuacct.usage").read_text().split()[0]) // 1000
            user = _v1_user_share(self.acct, usage)
            stat = CpuStat(usage, user, usage - user, where=str(self.acct))
        if self.throttle is not None and "nr_throttled" not in _keys_of(self.acct, self.version):
            kv = _keyed(self.throttle / "cpu.stat")
            stat = CpuStat(stat.usage_usec, stat.user_usec, stat.system_usec, kv.get("nr_throttled", 0),
                           kv.get("throttled_usec", kv.get("throttled_time", 0) // 1000), stat.where)
        return stat


def _v1_user_share(acct: Path, usage_usec: int) -> int:
    """The user-mode part of a v1 cgroup's ``usage_usec``: the usage times the user share
    of ``cpuacct.usage_user`` + ``cpuacct.usage_sys`` (``cpuacct.stat``'s ticks where
    those files are missing or both zero); 0 when nothing was sampled yet (module
    docstring)."""
    u = k = 0
    try:
        u, k = (int((acct / f).read_text().split()[0]) for f in ("cpuacct.usage_user", "cpuacct.usage_sys"))
    except (OSError, ValueError, IndexError):
        pass
    if u + k <= 0:
        try:
            ticks = _keyed(acct / "cpuacct.stat")
        except OSError:
            ticks = {}
        u, k = ticks.get("user", 0), ticks.get("system", 0)
    return usage_usec * u // (u + k) if u + k > 0 else 0


def _keyed(path: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for ln in path.read_text().splitlines():
        k, _, v = ln.partition(" ")
        if v.strip().lstrip("-").isdigit():
            out[k] = int(v)
    return out


def _keys_of(d: Path, version: int) -> set[str]:
    if version != 2:
        return set()
    try:
        return set(_keyed(d / "cpu.stat"))
    except OSError:
        return set()


def v2_root(root: Path | None = None) -> Path | None:
    """The cgroup v2 hierarchy under ``root`` (``Settings.cgroup_root``): ``root``
    itself on a unified host, ``root/unified`` on a hybrid one; None when no v2
    hierarchy is mounted there (a v1-only host)."""
    root = root or get_settings().cgroup_root
    for d in (root, root / "unified"):
        if (d / "cgroup.procs").exists() and (d / "cgroup.controllers").exists():
            return d
    return None


def cpu_cgroup(pid: int, root: Path | None = None, proc: Path = Path("/proc")) -> CpuCgroup | None:
    """The CPU-accounting cgroup of host process ``pid``, from ``<proc>/<pid>/cgroup``.

    Preferred: its v2 cgroup (line ``0::PATH``) when PATH is not the root (the root's
    ``cpu.stat`` counts the whole machine) and its folder under ``root`` or
    ``root/unified`` has ``cpu.stat``. Else the v1 ``cpuacct`` controller's folder with
    ``cpuacct.usage`` (mounted as ``cpuacct`` or ``cpu,cpuacct``). Either way the v1
    ``cpu`` controller's folder, when there is one, is kept for the throttling counters.
    ``root`` defaults to ``Settings.cgroup_root`` (``XFERLAB_CGROUP_ROOT``). Returns None
    when the process is gone or no such folder exists."""
    root = root or get_settings().cgroup_root
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    v1: dict[str, str] = {}
    v2_rel: str | None = None
    for ln in lines:
        parts = ln.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2_rel = parts[2].strip("/")
        for ctl in parts[1].split(","):
            v1[ctl] = parts[2].strip("/")
    throttle = None
    if "cpu" in v1:
        for mount in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
            d = root / mount / v1["cpu"]
            if (d / "cpu.stat").exists() and (d / "cpu.shares").exists():
                throttle = d
                break
    if v2_rel:
        for base in (root, root / "unified"):
            d = base / v2_rel
            if (d / "cpu.stat").exists() and (d / "cgroup.procs").exists():
                return CpuCgroup(d, 2, throttle)
    if "cpuacct" in v1:
        for mount in V1_CPUACCT_MOUNTS:
            d = root / mount / v1["cpuacct"]
            if (d / "cpuacct.usage").exists():
                return CpuCgroup(d, 1, throttle)
    return None


def from_engine_cpu_stats(cpu_stats: dict[str, Any]) -> CpuStat | None:
    """The same counters from Docker's stats API (``stats()["cpu_stats"]``, nanoseconds):
    ``cpu_usage.total_usage``, ``usage_in_usermode``, ``usage_in_kernelmode`` and
    ``throttling_data.throttled_periods`` / ``throttled_time``. None when the engine
    reports no usage."""
    usage = cpu_stats.get("cpu_usage") or {}
    if "total_usage" not in usage:
        return None
    thr = cpu_stats.get("throttling_data") or {}
    return CpuStat(int(usage["total_usage"]) // 1000, int(usage.get("usage_in_usermode", 0)) // 1000,
                   int(usage.get("usage_in_kernelmode", 0)) // 1000, int(thr.get("throttled_periods", 0)),
                   int(thr.get("throttled_time", 0)) // 1000, "engine")
