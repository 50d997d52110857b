"""The saturation curve (runner.report.saturation) on synthetic curves: a knee at a known
N, a curve whose throughput never levels off, p99 doubling before throughput drops, ties,
and users at rate R; and the curves read from a CampaignData."""
from __future__ import annotations

import pytest

from runner.report.data import CampaignData, Series, WorkloadFacts
from runner.report.saturation import CurvePoint, all_at_rate, curve_key, curves, knee, summary_lines


def _pts(rows) -> list[CurvePoint]:
    return [CurvePoint(n, tp, p99) for n, tp, p99 in rows]


def test_knee_at_a_known_n() -> None:
    # throughput grows to 1000 at N=16, stays within 5% (960 >= 950) at 32, falls at 64
    rows = [(1, 100, 1.0), (2, 200, 1.0), (4, 400, 1.1), (8, 800, 1.2), (16, 1000, 1.5), (32, 960, 1.9),
            (64, 700, 5.0)]
    assert knee(_pts(rows)) == 32


def test_within_five_percent_is_inclusive_and_below_is_not() -> None:
    assert knee(_pts([(1, 100, 1.0), (2, 1000, 1.0), (4, 950, 1.0)])) == 4   # exactly 95%
    assert knee(_pts([(1, 100, 1.0), (2, 1000, 1.0), (4, 949.9, 1.0)])) == 2


def test_p99_doubling_before_throughput_drops() -> None:
    # throughput flat from N=8 on, but p99 reaches 2x the first point's at N=32 (not below 2x)
    rows = [(1, 100, 10.0), (8, 1000, 12.0), (16, 1000, 19.9), (32, 1000, 20.0), (64, 990, 40.0)]
    assert knee(_pts(rows)) == 16


def test_curve_without_knee() -> None:
    # every point within 5% of the best has p99 at 2x or more: no knee
    assert knee(_pts([(1, 100, 1.0), (2, 500, 3.0), (4, 1000, 4.0)])) is None
    # fewer than two points, or no p99 at the first N
    assert knee(_pts([(1, 100, 1.0)])) is None
    assert knee(_pts([(1, 100, None), (2, 200, 1.0)])) is None


def test_still_rising_sweep_knee_is_its_end() -> None:
    rows = [(1, 100, 1.0), (2, 200, 1.0), (4, 400, 1.0)]
    assert knee(_pts(rows)) == 4


def test_ties_take_the_largest_n() -> None:
    rows = [(4, 1000, 1.0), (1, 500, 1.0), (8, 1000, 1.0), (2, 1000, 1.0)]  # any order
    assert knee(_pts(rows)) == 8
    with pytest.raises(ValueError, match="repeated"):
        knee(_pts([(1, 1, 1.0), (1, 2, 1.0)]))


def test_all_at_rate() -> None:
    pts = [CurvePoint(1, 1, 1, 1, 1), CurvePoint(2, 2, 1, 2, 2), CurvePoint(4, 3, 1, 4, 3), CurvePoint(8, 3, 1, 3, 2)]
    assert all_at_rate(pts) == 2  # at N=4 one repeat had 3 of 4 clients at R
    assert all_at_rate([CurvePoint(2, 1, 1, 1, 1)]) is None


def test_curve_key() -> None:
    assert curve_key("buffer_size=4096,clients=16,duration=1.0") == ("buffer_size=4096,duration=1.0", 16)
    assert curve_key("clients=4,duration=1.0") == ("duration=1.0", 4)
    assert curve_key("duration=1.0,clients=4") == ("duration=1.0", 4)
    assert curve_key("duration=1.0") is None


def _data() -> CampaignData:
    series = []
    rest = "duration=2.0,rate=None,user_rate=1048576"
    for n, tps, p99s, users in ((1, [100, 110, 90], [2.0, 2.0, 2.0], [1, 1, 1]),
                                (2, [200, 200, 200], [2.0, 2.1, 2.2], [2, 2, 2]),
                                (4, [390, 400, 410], [3.0, 3.0, 3.0], [4, 3, 4]),
                                (8, [400, 400, 400], [9.0, 9.0, 9.0], [5, 5, 5])):
        key = f"clients={n},{rest}"
        title = f"{n} clients RETR 1M for 2 s (per op, closed loop)"
        for metric, unit, vals in (("throughput", "MiB/s", tps), ("latency_p99", "ms", p99s),
                                   ("users_at_rate", "count", users)):
            series.append(Series("tpd", "retr_sustained", title, metric, unit, True, tuple(vals), key))
    # a non-sustained workload with two client counts is no curve
    for n in (10, 20):
        series.append(Series("tpd", "retr_concurrent", f"{n} concurrent", "throughput", "MiB/s", True, (1.0,),
                             f"clients={n}"))
    facts = {"retr_sustained": WorkloadFacts("x", "throughput", "MiB/s", True, sustained=True),
             "retr_concurrent": WorkloadFacts("y", "elapsed", "s", False)}
    return CampaignData(1, "sweep", ["tpd"], series, workloads=facts)


def test_curves_from_campaign_data() -> None:
    [c] = curves(_data())
    assert (c.server, c.workload, c.unit, c.user_rate) == ("tpd", "retr_sustained", "MiB/s", 1 << 20)
    assert [p.clients for p in c.points] == [1, 2, 4, 8]
    assert [p.throughput for p in c.points] == [100, 200, 400, 400]
    assert c.knee == 4 and not c.knee_at_end  # N=8: p99 9 ms >= 2 x 2 ms
    assert c.all_at_rate == 2  # N=4: one repeat had 3 of 4
    assert c.point(4).users_at_rate == 4 and c.point(4).min_users_at_rate == 3
    text = "\n".join(summary_lines(c))
    assert "knee: N = 4: 400.0 MiB/s, p99 3 ms" in text
    assert "users at rate 1 MiB/s" in text and "1: 1, 2: 2, 4: 4, 8: 5" in text
    assert "every client at that rate up to N = 2" in text
    assert c.as_dict()["points"][0] == {"clients": 1, "throughput": 100, "p99_ms": 2.0, "users_at_rate": 1,
                                        "min_users_at_rate": 1.0, "repeats": 3}


def test_knee_text() -> None:
    from runner.report.saturation import knee_text

    [c] = curves(_data())
    assert knee_text(c) == "tpd, retr_sustained: N = 4 (400.0 MiB/s, p99 3 ms)"
