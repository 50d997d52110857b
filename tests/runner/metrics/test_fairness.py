"""Fairness figures (runner.metrics.fairness) against hand-computed values, and the sample rows a
cell stores (runner.cell.samples.fairness_samples)."""
from __future__ import annotations

import math

import pytest

from runner.cell.samples import phase_samples
from runner.load.result import ClientFigures, PhaseResult
from runner.metrics.fairness import coefficient_of_variation, cv_from_jain, figures_from_raw, jain_index, sorted_curve

MIB = 1 << 20


def test_equal_shares_are_perfectly_fair():
    assert jain_index([1, 1, 1, 1]) == 1.0
    assert coefficient_of_variation([1, 1, 1, 1]) == 0.0


def test_one_client_takes_everything():
    # (4)^2 / (4 * 16) = 0.25 = 1/n, the lowest Jain's index of 4 clients
    assert jain_index([4, 0, 0, 0]) == 0.25
    # mean 1, population variance ((3)^2 + 3 * 1^2) / 4 = 3: CV = sqrt(3)
    assert coefficient_of_variation([4, 0, 0, 0]) == pytest.approx(math.sqrt(3))


def test_three_values_by_hand():
    # x = 1, 2, 3: sum 6, sum of squares 14 -> J = 36 / (3 * 14) = 6/7
    assert jain_index([1, 2, 3]) == pytest.approx(6 / 7)
    # mean 2, population variance (1 + 0 + 1) / 3 = 2/3 -> CV = sqrt(2/3) / 2 = 0.408248...
    assert coefficient_of_variation([1, 2, 3]) == pytest.approx(0.4082482905)
    # J = 1 / (1 + CV^2) = 1 / (1 + 1/6) = 6/7: the identity cv_from_jain inverts
    assert cv_from_jain(6 / 7) == pytest.approx(math.sqrt(1 / 6))


def test_cv_is_population_not_sample():
    # the sample stdev (n - 1) of 1, 2, 3 is 1 -> CV 0.5; the population one is 0.408
    assert coefficient_of_variation([1, 2, 3]) != pytest.approx(0.5)


def test_degenerate_inputs():
    assert jain_index([0, 0]) == 1.0 and coefficient_of_variation([0, 0]) == 0.0
    with pytest.raises(ValueError):
        jain_index([])
    with pytest.raises(ValueError):
        coefficient_of_variation([])
    with pytest.raises(ValueError):
        cv_from_jain(0.0)
    with pytest.raises(ValueError):
        cv_from_jain(1.5)
    assert cv_from_jain(1.0) == 0.0


def test_ftp_figures_from_raw():
    # rates 4, 2, 1, 1 MiB/s; times 1, 2, 4, 8 s
    raw = [[4 * MIB, 1.0, True], [4 * MIB, 2.0, True], [4 * MIB, 4.0, True], [8 * MIB, 8.0, False]]
    f = figures_from_raw(raw, http=False)
    assert f is not None and f.clients == 4 and f.rate_unit == "MiB/s"
    # sum 8, sum of squares 16 + 4 + 1 + 1 = 22: J = 64 / 88
    assert f.jain == pytest.approx(64 / 88)
    # mean 2, population variance (4 + 0 + 1 + 1) / 4 = 1.5: CV = sqrt(1.5) / 2
    assert f.cv == pytest.approx(math.sqrt(1.5) / 2)
    assert f.jain == pytest.approx(1 / (1 + f.cv ** 2))
    # sorted rates 1, 1, 2, 4: p50 (rank 1.5) = 1.5; p95 (rank 2.85) = 2 + 0.85 * 2 = 3.7
    assert (f.min_rate, f.p50_rate, f.p95_rate, f.max_rate) == pytest.approx((1.0, 1.5, 3.7, 4.0))
    # sorted times 1, 2, 4, 8: p50 = 3; p95 = 4 + 0.85 * 4 = 7.4
    assert (f.min_time, f.p50_time, f.p95_time, f.max_time) == pytest.approx((1.0, 3.0, 7.4, 8.0))
    assert sorted_curve(raw, http=False) == pytest.approx([4.0, 2.0, 1.0, 1.0])


def test_http_figures_share_is_the_request_count():
    # 600 and 400 requests, one client 2 s, the other 1 s: rates 300 and 400 req/s;
    # Jain over counts as the stored `jain` of HTTP cells: 1000^2 / (2 * (600^2 + 400^2))
    raw = [[600, 2.0, True], [400, 1.0, True]]
    f = figures_from_raw(raw, http=True)
    assert f is not None and f.rate_unit == "req/s"
    assert f.jain == pytest.approx(1000 ** 2 / (2 * (600 ** 2 + 400 ** 2)))
    assert f.cv == pytest.approx(0.2)  # mean 500, population stdev 100
    assert (f.min_rate, f.max_rate) == (300.0, 400.0)
    assert sorted_curve(raw, http=True) == [400.0, 300.0]


def test_no_figures_below_two_clients():
    assert figures_from_raw(None, http=False) is None
    assert figures_from_raw([[1, 1.0, True]], http=False) is None
    with pytest.raises(ValueError):
        figures_from_raw([[1], [2]], http=False)


def test_zero_time_client_has_rate_zero():
    f = figures_from_raw([[MIB, 1.0, True], [0, 0.0, False]], http=False)
    assert f is not None and f.min_rate == 0.0 and f.jain == 0.5


def test_phase_samples_store_every_figure_and_the_raw_list():
    r = PhaseResult(workload="retr_concurrent", elapsed_s=8.0, bytes=20 * MIB, ops=4,
                    clients=[ClientFigures(4 * MIB, 1.0), ClientFigures(4 * MIB, 2.0), ClientFigures(4 * MIB, 4.0),
                             ClientFigures(8 * MIB, 8.0, False)])
    rows = {s.stat: s for s in phase_samples(r) if s.metric == "fairness"}
    assert set(rows) == {"jain", "cv", "min_rate", "p50_rate", "p95_rate", "max_rate",
                         "min_time", "p50_time", "p95_time", "max_time"}
    assert rows["jain"].raw == [[4 * MIB, 1.0, True], [4 * MIB, 2.0, True], [4 * MIB, 4.0, True],
                                [8 * MIB, 8.0, False]]
    assert rows["jain"].value == pytest.approx(64 / 88) and rows["cv"].unit == "ratio"
    assert rows["p95_rate"].value == pytest.approx(3.7) and rows["p95_rate"].unit == "MiB/s"
    assert rows["p50_time"].value == pytest.approx(3.0) and rows["p50_time"].unit == "s"
    # what is stored equals what is derived from the stored list (old cells: the same code)
    derived = figures_from_raw(rows["jain"].raw, http=False)
    assert derived is not None
    assert all(rows[k].value == pytest.approx(v) for k, v in derived.as_dict().items() if k in rows)


def test_single_client_phase_stores_no_fairness():
    r = PhaseResult(workload="retr", elapsed_s=1.0, bytes=MIB, ops=1, clients=[ClientFigures(MIB, 1.0)])
    assert not [s for s in phase_samples(r) if s.metric == "fairness"]
