"""runner.cell.server_cpu.SpanWatch: the server's counters and profiler at the ends of the
measured span, in an order that keeps the reading and the switching outside the span."""
from __future__ import annotations

import pytest

from runner.cell.server_cpu import SpanWatch, phase_cpu
from runner.load.base import MEASURE_BEGIN, MEASURE_END
from runner.metrics.cgroup_cpu import CpuStat


class _Log:
    """Readers and a profiler that write what happened, in order, to one list."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.usec = 0

    def cgroup(self) -> CpuStat:
        self.events.append("cgroup")
        self.usec += 250_000
        return CpuStat(self.usec, self.usec // 2, self.usec // 2, 0, 0, "/sys/fs/cgroup/x")

    def tree(self) -> tuple[float, float]:
        self.events.append("tree")
        return (self.usec / 2e6, self.usec / 2e6)

    def span_begin(self) -> None:
        self.events.append("profile on")

    def span_end(self) -> None:
        self.events.append("profile off")


def test_readings_before_the_profiler_goes_on_and_after_it_goes_off():
    log = _Log()
    w = SpanWatch(log.cgroup, log.tree, log)
    assert w.mark("loaded") is False and log.events == []
    assert w.mark(MEASURE_END) is True and log.events == [] and not w.complete  # no span yet
    assert w.mark(MEASURE_BEGIN) is True
    assert w.mark(MEASURE_BEGIN) is True  # a second begin changes nothing
    assert w.mark(MEASURE_END) is True and w.mark(MEASURE_END) is True
    assert log.events == ["cgroup", "tree", "profile on", "profile off", "cgroup", "tree"]
    assert w.complete
    assert w.cgroup_delta().usage_usec == 250_000
    assert w.tree_delta() == pytest.approx((0.125, 0.125))


def test_without_a_cgroup_or_sampler_the_deltas_are_none():
    w = SpanWatch(None, None)
    w.mark(MEASURE_BEGIN)
    assert w.cgroup_delta() is None and w.tree_delta() is None  # not complete
    w.mark(MEASURE_END)
    assert w.complete and w.cgroup_delta() is None and w.tree_delta() is None


def test_a_span_figure_keeps_the_whole_phase_beside_it():
    span = CpuStat(300_000, 100_000, 200_000, 0, 0, "/x")
    whole = CpuStat(3_400_000, 1_000_000, 2_400_000, 0, 0, "/x")
    cpu = phase_cpu((0.1, 0.2), span, "span", whole=whole)
    assert (cpu.window, cpu.total_s, cpu.phase_s) == ("span", pytest.approx(0.3), pytest.approx(3.4))
    assert phase_cpu(None, whole, whole=whole).phase_s is None  # a phase figure has no second one
    with pytest.raises(ValueError, match="window 'measured'"):
        phase_cpu(None, span, "measured")
