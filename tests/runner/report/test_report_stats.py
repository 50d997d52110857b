"""runner.report.stats against hand-checked values and scipy computed independently."""
from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats as sp

from runner.report import fmt
from runner.report.stats import compare, geometric_mean_slowdown, mann_whitney_p, median_ci_rank, summarize


def test_summarize_n5_hand_checked():
    s = summarize([600.49, 610.2, 605.1, 598.7, 615.0])
    assert s.n == 5
    assert s.median == 605.1
    # n=5: 95% is unreachable; [min, max] covers 1 - 2/32
    assert (s.ci_low, s.ci_high) == (598.7, 615.0)
    assert s.ci_coverage == pytest.approx(0.9375)
    assert s.mean == pytest.approx(605.898)
    assert s.stdev == pytest.approx(statistics.stdev([600.49, 610.2, 605.1, 598.7, 615.0]))
    assert (s.min, s.max) == (598.7, 615.0)
    assert s.rel_ci == pytest.approx((615.0 - 598.7) / 2 / 605.1)


@pytest.mark.parametrize("n,rank,coverage", [
    (2, 1, 0.5), (3, 1, 0.75), (4, 1, 0.875), (5, 1, 0.9375),
    (6, 1, 1 - 2 / 64), (10, 2, 1 - 2 * 11 / 1024), (20, 6, None)])
def test_median_ci_rank_binomial(n, rank, coverage):
    j, cov = median_ci_rank(n)
    assert j == rank
    expected = coverage if coverage is not None else 1 - 2 * sp.binom.cdf(rank - 1, n, 0.5)
    assert cov == pytest.approx(expected)


@pytest.mark.parametrize("n", [6, 7, 10, 15, 20, 31])
def test_ci_matches_scipy_quantile_test(n):
    rng = np.random.default_rng(n)
    x = rng.lognormal(size=n)
    s = summarize(x)
    ci = sp.quantile_test(x, q=float(np.median(x)), p=0.5).confidence_interval(0.95)
    assert (s.ci_low, s.ci_high) == pytest.approx((ci.low, ci.high))
    assert s.ci_coverage >= 0.95


def test_summarize_degenerate():
    one = summarize([3.5])
    assert (one.n, one.median, one.mean, one.min, one.max) == (1, 3.5, 3.5, 3.5, 3.5)
    assert one.ci_low is one.ci_high is one.ci_coverage is one.stdev is one.rel_ci is None
    flat = summarize([2.0] * 5)
    assert (flat.ci_low, flat.ci_high, flat.stdev, flat.rel_ci) == (2.0, 2.0, 0.0, 0.0)
    zeros = summarize([0, 0, 0])
    assert zeros.median == 0 and zeros.rel_ci is None
    with pytest.raises(ValueError, match="samples is empty"):
        summarize([])
    with pytest.raises(ValueError, match="non-finite"):
        summarize([1.0, math.nan])


def test_compare_throughput_slower_matches_scipy():
    a = [1652.72, 1640.0, 1660.5, 1630.1, 1671.3]
    b = [1524.05, 1510.2, 1530.9, 1498.7, 1545.0]
    c = compare(a, b, higher_is_better=True)
    assert c.p_value == pytest.approx(sp.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    assert c.p_value == pytest.approx(2 / 252)  # exact test, complete separation, 5 vs 5
    assert c.significant and c.direction == "slower" and c.winner == "a"
    assert c.norm == pytest.approx(1524.05 / 1652.72)
    assert c.factor == pytest.approx(1652.72 / 1524.05)
    assert c.speedup == pytest.approx(1524.05 / 1652.72 - 1)
    assert fmt.ratio(c) == "1.08x slower"
    assert fmt.speedup(c) == "-0.08x"


def test_compare_seed_speedup_formula():
    # seed 001 hidden comment: old = 1524.05, new = 1652.72 -> "+0.08"
    c = compare([1524.05] * 5, [1652.72] * 5, higher_is_better=True)
    assert c.speedup == pytest.approx((100.0 * 1652.72 / 1524.05 - 100) / 100)
    assert fmt.speedup(c) == "+0.08x"
    # seed 000: login 1.70 s -> 0.19 s printed "+8x" (lower is better: old/new - 1)
    e = compare([1.70] * 5, [0.19] * 5, higher_is_better=False)
    assert e.speedup == pytest.approx(1.70 / 0.19 - 1)
    assert e.direction == "faster" and fmt.ratio(e) == "8.95x faster"
    assert e.significant  # constant but different samples: normal approximation


def test_compare_not_significant_and_small_n():
    a, b = [0.19, 0.21, 0.18, 0.20, 0.22], [0.20, 0.18, 0.23, 0.21, 0.22]
    c = compare(a, b, higher_is_better=False)
    assert c.p_value == pytest.approx(sp.mannwhitneyu(a, b, alternative="two-sided",
                                                      method=sp.PermutationMethod(n_resamples=50_000)).pvalue)
    assert not c.significant and c.winner == ""
    assert fmt.ratio(c) == "not significant"
    assert fmt.ratio(c, check_significant=False) == "1.05x slower"
    # 3 vs 3 can never reach p < 0.05 with the exact test
    three = compare([1, 2, 3], [10, 11, 12], higher_is_better=True)
    assert three.p_value == pytest.approx(0.1) and not three.significant
    # alpha is configurable
    assert compare([1, 2, 3], [10, 11, 12], True, alpha=0.2).significant


def test_compare_degenerate():
    one = compare([5.0], [6.0], higher_is_better=True)
    assert one.p_value == 1.0 and not one.significant and one.a.ci_low is None
    same = compare([2.0] * 5, [2.0] * 5, higher_is_better=True)
    assert same.p_value == 1.0 and same.direction == "same" and fmt.ratio(same) == "no change"
    zero = compare([0.0] * 5, [10.0] * 5, higher_is_better=True)
    assert zero.direction == "undefined" and zero.factor is None and zero.speedup is None
    assert not zero.significant and fmt.ratio(zero) == "n/a" and fmt.speedup(zero) == "n/a"
    both_zero = compare([0.0] * 3, [0.0] * 3, higher_is_better=True)
    assert both_zero.direction == "same" and not both_zero.significant
    with pytest.raises(ValueError, match="^a is empty"):
        compare([], [1.0], True)
    with pytest.raises(ValueError, match="^b is empty"):
        compare([1.0], [], True)
    assert mann_whitney_p([1, 1], [1, 1, 1]) == 1.0


def test_geometric_mean_slowdown_mixed_directions():
    faster = compare([100.0] * 5, [200.0] * 5, higher_is_better=True)  # slowdown 0.5
    slower = compare([1.0] * 5, [2.0] * 5, higher_is_better=False)     # slowdown 2
    undefined = compare([0.0] * 5, [1.0] * 5, higher_is_better=False)
    assert geometric_mean_slowdown([faster, slower, undefined]) == pytest.approx(1.0)
    assert geometric_mean_slowdown([undefined]) is None
    assert fmt.normalized(geometric_mean_slowdown([slower, slower])) == "2.00x slower"


def test_formatting():
    assert fmt.number(1652.7213) == "1652.72"
    assert fmt.number(0.19) == "0.190"
    assert fmt.number(0.0234) == "0.0234"
    assert fmt.number(0) == "0.00"
    assert fmt.bytes2human(352 * 1024) == "352.0K"
    assert fmt.bytes2human(6.7 * 1024 * 1024) == "6.7M"
    assert fmt.bytes2human(100) == "100.0B"
    assert fmt.rel_ci(0.02) == "+- 2%"
    assert fmt.rel_ci(0.004) == "+- 0.4%"
    assert fmt.rel_ci(None) == ""
    assert fmt.speedup_value(-0.001) == "0.00x"
    c = compare([1652.7] * 4 + [1600.0], [1524.1] * 4 + [1440.0], higher_is_better=True)
    assert fmt.oneliner(c, "MiB/s") == "1652.7 MiB/s +- 2% -> 1524.1 MiB/s +- 3%: 1.08x slower"  # DESIGN.md example


def test_summarize_computes_the_ci_rank_once_per_n():
    """history summarises hundreds of points of equal n: the binomial rank is cached."""
    from runner.report.stats import median_ci_rank

    median_ci_rank.cache_clear()
    for i in range(200):
        summarize([1.0 + i, 2.0, 3.0, 4.0, 5.0 + i])
    summarize([1.0, 2.0, 3.0])
    info = median_ci_rank.cache_info()
    assert (info.misses, info.hits) == (2, 199)
    assert summarize([1.0, 2.0, 3.0, 4.0, 5.0]).ci_coverage == 0.9375  # cached value, same result


def test_mann_whitney_small_samples_with_ties_are_exact():
    """Tied values at small n: the exact permutation p, not the normal approximation
    (which gave 0.047 for 3 vs 3 wholly separated samples: methodology says no 3 vs 3
    comparison reaches p < 0.05)."""
    from runner.report.stats import mann_whitney_p

    assert mann_whitney_p([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]) == pytest.approx(0.1)
    assert mann_whitney_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(0.1)  # no ties: scipy's exact
    assert mann_whitney_p([1.0] * 5 + [2.0], [3.0] * 6) == pytest.approx(2 / 924)  # C(12, 6) = 924 splits
    assert mann_whitney_p([1.0, 1.0, 2.0], [1.0, 1.0, 2.0]) == pytest.approx(1.0)
    # one value on a side, with ties (scipy's permutation test refuses it): the n + 1 splits enumerated
    assert mann_whitney_p([2.0], [1.0, 1.0, 1.0]) == pytest.approx(1 / 4)
    assert mann_whitney_p([1.0, 1.0, 1.0], [2.0]) == pytest.approx(1 / 4)
    assert mann_whitney_p([1.0], [1.0, 2.0]) == pytest.approx(1.0)
