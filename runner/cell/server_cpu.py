"""The server CPU of one measured phase: the server's cgroup counters when it has a cgroup
of its own, the process-tree sum otherwise, and the other figure as a cross-check.

The cgroup figure (runner.metrics.cgroup_cpu) counts every task that ran in the cgroup,
exited ones included, in microseconds; the process-tree figure (runner.metrics.tree)
sums the live processes at each reading plus the children they waited for, in clock
ticks, and misses what exited unwaited-for or between the readings (docs/methodology.md,
"What server CPU counts").
"""
from __future__ import annotations

from dataclasses import dataclass

from runner.metrics.cgroup_cpu import CpuStat
from runner.store.models import Sample

#: Relative disagreement between the cgroup and the process-tree figure above which a
#: cell is flagged in reports (``|tree - cgroup| / cgroup``).
DISAGREEMENT = 0.10

SOURCES = ("cgroup", "tree")


@dataclass(frozen=True)
class ServerCpu:
    """Server CPU of a phase.

    Attributes:
        source: ``cgroup`` (the server's cgroup counters) or ``tree`` (the process-tree sum).
        user_s: user-mode CPU seconds, from ``source``.
        system_s: kernel-mode CPU seconds, from ``source``.
        usage_s: the cgroup's total CPU seconds (``usage_usec``; None for ``tree``); the
            per-GiB and per-op figures use it.
        nr_throttled: CFS periods the cgroup was throttled in (None for ``tree``).
        throttled_s: seconds its tasks were throttled (None for ``tree``).
        tree_s: the process-tree figure, user + system seconds, when it was read (the
            cross-check of a ``cgroup`` figure); None otherwise.
        where: the cgroup read (folder or ``engine``); "" for ``tree``.
    """

    source: str
    user_s: float
    system_s: float
    usage_s: float | None = None
    nr_throttled: int | None = None
    throttled_s: float | None = None
    tree_s: float | None = None
    where: str = ""

    @property
    def total_s(self) -> float:
        """The phase's server CPU seconds: ``usage_s`` for a cgroup figure, else user + system."""
        return self.usage_s if self.usage_s is not None else self.user_s + self.system_s

    @property
    def tree_diff(self) -> float | None:
        """``(tree - cgroup) / cgroup`` for a cgroup figure with its cross-check (ratio;
        -0.99: the tree saw 1% of it); None without both or when the cgroup saw nothing."""
        if self.source != "cgroup" or self.tree_s is None or self.total_s <= 0:
            return None
        return (self.tree_s - self.total_s) / self.total_s


def phase_cpu(tree: tuple[float, float] | None, cgroup: CpuStat | None) -> ServerCpu | None:
    """The phase's :class:`ServerCpu` from the process-tree delta ``tree`` ((user, system)
    seconds, or None when not sampled) and the cgroup delta ``cgroup``
    (CpuStat.since; None when the server has no cgroup). The cgroup wins when present;
    None when neither was read."""
    tree_s = tree[0] + tree[1] if tree is not None else None
    if cgroup is not None:
        return ServerCpu("cgroup", cgroup.user_usec / 1e6, cgroup.system_usec / 1e6, cgroup.usage_usec / 1e6,
                         cgroup.nr_throttled, cgroup.throttled_usec / 1e6, tree_s, cgroup.where)
    if tree is not None:
        return ServerCpu("tree", tree[0], tree[1])
    return None


def server_cpu_samples(cpu: ServerCpu) -> list[Sample]:
    """Sample rows of metric ``server_cpu`` for one phase (seconds unless said): stats
    ``user`` and ``system`` (from ``cpu.source``; the ``raw`` of ``user`` is
    ``{"source", "where"}``), and for a cgroup figure ``usage`` (s), ``nr_throttled``
    (count), ``throttled`` (s) and, with its cross-check, ``tree`` (the process-tree
    figure, s) and ``tree_diff`` (ratio, :attr:`ServerCpu.tree_diff`). The per-GiB and
    per-op rows are runner.cell.samples.efficiency_samples of :attr:`ServerCpu.total_s`."""
    out = [Sample(metric="server_cpu", stat="user", value=cpu.user_s, unit="s",
                  raw={"source": cpu.source, "where": cpu.where}),
           Sample(metric="server_cpu", stat="system", value=cpu.system_s, unit="s")]
    if cpu.usage_s is not None:
        out.append(Sample(metric="server_cpu", stat="usage", value=cpu.usage_s, unit="s"))
    if cpu.nr_throttled is not None:
        out.append(Sample(metric="server_cpu", stat="nr_throttled", value=float(cpu.nr_throttled), unit="count"))
    if cpu.throttled_s is not None:
        out.append(Sample(metric="server_cpu", stat="throttled", value=cpu.throttled_s, unit="s"))
    if cpu.tree_s is not None and cpu.source == "cgroup":
        out.append(Sample(metric="server_cpu", stat="tree", value=cpu.tree_s, unit="s"))
    diff = cpu.tree_diff
    if diff is not None:
        out.append(Sample(metric="server_cpu", stat="tree_diff", value=diff, unit="ratio"))
    return out
