"""The server CPU of one measured phase: the server's cgroup counters when it has a cgroup
of its own, the process-tree sum otherwise, and the other figure as a cross-check.

The counters are read at the ends of the phase's **measured span** when the driver marks
it (runner.load.base.MEASURE_BEGIN / MEASURE_END: xferlab's own FTP client), so the
untimed set-up (logging in 300 idle sessions before one RETR) and teardown (DELE, QUIT)
are not charged to the figure; at the ends of the whole phase otherwise
(:attr:`ServerCpu.window`; docs/methodology.md, "What server CPU counts").

The cgroup figure (runner.metrics.cgroup_cpu) counts every task that ran in the cgroup,
exited ones included, in microseconds; the process-tree figure (runner.metrics.tree)
sums the live processes at each reading plus the children they waited for, in clock
ticks, and misses what exited unwaited-for or between the readings (docs/methodology.md,
"What server CPU counts").
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runner.load.base import MEASURE_BEGIN, MEASURE_END
from runner.metrics.cgroup_cpu import CpuStat
from runner.store.models import Sample

#: Relative disagreement between the cgroup and the process-tree figure above which a
#: cell is flagged in reports (``|tree - cgroup| / cgroup``).
DISAGREEMENT = 0.10

SOURCES = ("cgroup", "tree")
#: What a figure spans: the measured span (``span``) or the whole phase (``phase``).
WINDOWS = ("span", "phase")


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
        window: ``span`` (read at the ends of the measured span) or ``phase`` (at the
            ends of the whole phase, set-up and teardown included).
        phase_s: for a ``span`` cgroup figure, the cgroup's usage over the whole phase
            (seconds; what the set-up and teardown cost is ``phase_s - usage_s``); None
            otherwise.
    """

    source: str
    user_s: float
    system_s: float
    usage_s: float | None = None
    nr_throttled: int | None = None
    throttled_s: float | None = None
    tree_s: float | None = None
    where: str = ""
    window: str = "phase"
    phase_s: float | None = None

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


def phase_cpu(tree: tuple[float, float] | None, cgroup: CpuStat | None, window: str = "phase", *,
              whole: CpuStat | None = None) -> ServerCpu | None:
    """The phase's :class:`ServerCpu` from the process-tree delta ``tree`` ((user, system)
    seconds, or None when not sampled) and the cgroup delta ``cgroup``
    (CpuStat.since; None when the server has no cgroup), both over ``window`` (one of
    :data:`WINDOWS`); ``whole``: the cgroup delta over the whole phase, kept as
    ``phase_s`` of a ``span`` figure. The cgroup wins when present; None when neither
    was read. Raises ValueError for another window."""
    if window not in WINDOWS:
        raise ValueError(f"window {window!r}: want one of {WINDOWS}")
    tree_s = tree[0] + tree[1] if tree is not None else None
    if cgroup is not None:
        phase_s = whole.usage_usec / 1e6 if whole is not None and window == "span" else None
        return ServerCpu("cgroup", cgroup.user_usec / 1e6, cgroup.system_usec / 1e6, cgroup.usage_usec / 1e6,
                         cgroup.nr_throttled, cgroup.throttled_usec / 1e6, tree_s, cgroup.where, window, phase_s)
    if tree is not None:
        return ServerCpu("tree", tree[0], tree[1], window=window)
    return None


class SpanWatch:
    """The server's CPU counters and profiler at the ends of a phase's measured span.

    The cell passes :meth:`mark` the driver's checkpoint names; at
    runner.load.base.MEASURE_BEGIN it reads the counters and then switches the profiler
    on, at MEASURE_END the reverse, so neither reading nor switching is inside the span.

    Args:
        read_cgroup: the server's cgroup counters now (the backend handle's
            ``cgroup_cpu``), or None when the server has none.
        read_tree: the process tree's (user, system) CPU seconds now (the memory
            sampler's ``cpu_times``), or None when there is no sampler.
        profiler: the cell's PhaseProfiler (runner.metrics.profile) started with
            ``span=True``, or None.
    """

    def __init__(self, read_cgroup: Callable[[], CpuStat | None] | None,
                 read_tree: Callable[[], tuple[float, float]] | None, profiler: Any = None) -> None:
        self._cgroup = read_cgroup
        self._tree = read_tree
        self.profiler = profiler
        self._at: dict[str, tuple[CpuStat | None, tuple[float, float] | None]] = {}

    def mark(self, name: str) -> bool:
        """Handle one checkpoint; True when ``name`` was a span mark (only the first
        MEASURE_BEGIN and the first MEASURE_END after it count), False for any other name."""
        if name not in (MEASURE_BEGIN, MEASURE_END):
            return False
        if name in self._at or (name == MEASURE_END and MEASURE_BEGIN not in self._at):
            return True
        if name == MEASURE_END and self.profiler is not None:
            self.profiler.span_end()
        self._at[name] = (self._cgroup() if self._cgroup else None, self._tree() if self._tree else None)
        if name == MEASURE_BEGIN and self.profiler is not None:
            self.profiler.span_begin()
        return True

    @property
    def complete(self) -> bool:
        """Both ends of the span were seen."""
        return MEASURE_BEGIN in self._at and MEASURE_END in self._at

    def cgroup_delta(self) -> CpuStat | None:
        """The cgroup's counters over the span; None unless :attr:`complete` with both readings."""
        if not self.complete:
            return None
        (c0, _), (c1, _) = self._at[MEASURE_BEGIN], self._at[MEASURE_END]
        return c1.since(c0) if c0 is not None and c1 is not None else None

    def tree_delta(self) -> tuple[float, float] | None:
        """The process tree's (user, system) CPU seconds over the span, each clamped at
        0; None unless :attr:`complete` with both readings."""
        if not self.complete:
            return None
        (_, t0), (_, t1) = self._at[MEASURE_BEGIN], self._at[MEASURE_END]
        if t0 is None or t1 is None:
            return None
        return (max(0.0, t1[0] - t0[0]), max(0.0, t1[1] - t0[1]))


def server_cpu_samples(cpu: ServerCpu) -> list[Sample]:
    """Sample rows of metric ``server_cpu`` for one phase (seconds unless said): stats
    ``user`` and ``system`` (from ``cpu.source``; the ``raw`` of ``user`` is
    ``{"source", "where", "window"}``), and for a cgroup figure ``usage`` (s), ``nr_throttled``
    (count), ``throttled`` (s) and, with its cross-check, ``tree`` (the process-tree
    figure, s) and ``tree_diff`` (ratio, :attr:`ServerCpu.tree_diff`); a ``span`` cgroup
    figure adds ``phase`` (s, :attr:`ServerCpu.phase_s`). The per-GiB and
    per-op rows are runner.cell.samples.efficiency_samples of :attr:`ServerCpu.total_s`."""
    out = [Sample(metric="server_cpu", stat="user", value=cpu.user_s, unit="s",
                  raw={"source": cpu.source, "where": cpu.where, "window": cpu.window}),
           Sample(metric="server_cpu", stat="system", value=cpu.system_s, unit="s")]
    if cpu.usage_s is not None:
        out.append(Sample(metric="server_cpu", stat="usage", value=cpu.usage_s, unit="s"))
    if cpu.nr_throttled is not None:
        out.append(Sample(metric="server_cpu", stat="nr_throttled", value=float(cpu.nr_throttled), unit="count"))
    if cpu.throttled_s is not None:
        out.append(Sample(metric="server_cpu", stat="throttled", value=cpu.throttled_s, unit="s"))
    if cpu.tree_s is not None and cpu.source == "cgroup":
        out.append(Sample(metric="server_cpu", stat="tree", value=cpu.tree_s, unit="s"))
    if cpu.phase_s is not None:
        out.append(Sample(metric="server_cpu", stat="phase", value=cpu.phase_s, unit="s"))
    diff = cpu.tree_diff
    if diff is not None:
        out.append(Sample(metric="server_cpu", stat="tree_diff", value=diff, unit="ratio"))
    return out
