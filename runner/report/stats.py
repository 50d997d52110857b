"""Statistics of repeated cells: median with a 95% CI, and two-sample comparisons.

Every cell is repeated (default 5 times, DESIGN.md) and reported as a median with
a 95% confidence interval; comparisons give a pyperf-style ratio, a Mann-Whitney U
p-value on the raw samples, and seed 001's "speedup" figure.

CI method (documented in docs/methodology.md as well)
-----------------------------------------------------
Distribution-free confidence interval of the median from order statistics: the
number of samples below the true median is Binomial(n, 1/2), so the interval
``[x_(j), x_(n+1-j)]`` (1-based order statistics) covers the median with
probability ``1 - 2 * binom.cdf(j - 1, n, 1/2)`` whatever the distribution
(e.g. Hollander & Wolfe, *Nonparametric Statistical Methods*, section 3.6; the
same interval as ``scipy.stats.quantile_test(...).confidence_interval()``).
We pick the narrowest such symmetric interval whose coverage is at least the
requested level (0.95).

With few repeats 95% cannot be reached: for n <= 5 even ``[min, max]`` covers
only ``1 - 2 / 2**n`` (n=5: **93.75%**, n=4: 87.5%, n=3: 75%, n=2: 50%). We then
report ``[min, max]`` and the coverage actually achieved in
:attr:`Summary.ci_coverage`, rather than pretending. n=6 gives [min, max] at
96.9%; n=10 gives ``[x_(2), x_(9)]`` at 97.9%. No random resampling is used, so
results are exactly reproducible.

Comparison sources
------------------
* Ratio and its wording ("1.08x faster", "1.08x slower", "no change") follow
  pyperf's ``compare_to`` (``pyperf/_compare.py``: ``format_normalized_mean``),
  generalised to metrics where higher is better, and computed on medians (pyperf
  uses means) because medians are what we report.
* Significance: Mann-Whitney U, two-sided, on the raw samples
  (``scipy.stats.mannwhitneyu``), at ``alpha`` (default 0.05). Note the exact test
  cannot reach p < 0.05 with fewer than 4 samples per side (3 vs 3: p >= 0.1;
  4 vs 4: p >= 0.029; 5 vs 5: p >= 0.0079).
* Speedup: seed 001's hidden comment, ``(100 * new / old - 100) / 100`` i.e.
  ``new / old - 1``, printed ``"+%.2f" `` with an ``x`` suffix (``+0.08x``); the
  seed applies it so that positive means "the new one wins", so for metrics where
  lower is better (elapsed, memory) we use ``old / new - 1`` (seed 000: login
  1.70 s -> 0.19 s printed ``+8x``).
"""
from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from scipy import stats as _sp

CONFIDENCE = 0.95
ALPHA = 0.05


@dataclass(frozen=True)
class Summary:
    """Summary of the repeats of one metric (all values in the metric's unit).

    Attributes:
        n: number of samples.
        median: sample median.
        ci_low, ci_high: bounds of the CI of the median (order statistics, see the
            module docstring); ``None`` when n < 2 (no interval can be formed).
        ci_coverage: probability that ``[ci_low, ci_high]`` covers the true median
            (0.9375 for n=5); ``None`` when n < 2.
        mean: arithmetic mean.
        stdev: sample standard deviation (n - 1 denominator); ``None`` when n < 2.
        min, max: extremes.
        rel_ci: CI half-width relative to the median, ``(ci_high - ci_low) / 2 /
            |median|`` (0.02 prints as ``+- 2%``); ``None`` when there is no CI
            or the median is 0.
    """

    n: int
    median: float
    ci_low: float | None
    ci_high: float | None
    ci_coverage: float | None
    mean: float
    stdev: float | None
    min: float
    max: float
    rel_ci: float | None


def _check(samples: Sequence[float], name: str) -> list[float]:
    values = [float(v) for v in samples]
    if not values:
        raise ValueError(f"{name} is empty: at least one sample is needed")
    bad = [v for v in values if not math.isfinite(v)]
    if bad:
        raise ValueError(f"{name} contains non-finite values: {bad[:3]!r}")
    return values


@lru_cache(maxsize=1024)
def median_ci_rank(n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """1-based rank ``j`` of the lower bound of the median CI ``[x_(j), x_(n+1-j)]``
    and its exact coverage, from the Binomial(n, 1/2) distribution (scipy.stats.binom).

    Returns ``(1, 1 - 2 / 2**n)`` when even ``[min, max]`` falls short of
    ``confidence`` (n <= 5 for 95%). Raises ValueError when n < 1.

    Cached per ``(n, confidence)``: the scipy computation dominates :func:`summarize`,
    and a history series has hundreds of points of the same n.
    """
    if n < 1:
        raise ValueError(f"median_ci_rank: n must be >= 1, got {n}")
    alpha = 1.0 - confidence
    j = 1
    while j + 1 <= (n + 1) // 2 and _sp.binom.cdf(j, n, 0.5) <= alpha / 2:
        j += 1
    coverage = 1.0 - 2.0 * float(_sp.binom.cdf(j - 1, n, 0.5))
    return j, coverage


def summarize(samples: Sequence[float], *, confidence: float = CONFIDENCE) -> Summary:
    """Summarize one metric's repeats: median, its CI, mean, stdev, min, max.

    Args:
        samples: raw values, one per repeat, any order (unit of the metric).
        confidence: target coverage of the CI of the median (default 0.95).

    Raises:
        ValueError: ``samples`` is empty or holds NaN/inf.

    Degenerate inputs: n=1 gives no CI/stdev (``None``); all-equal samples give a
    zero-width CI and ``rel_ci == 0``; a zero median gives ``rel_ci is None``.
    """
    values = sorted(_check(samples, "samples"))
    n = len(values)
    median = float(statistics.median(values))
    mean = float(statistics.fmean(values))
    if n >= 2:
        j, coverage = median_ci_rank(n, confidence)
        lo, hi = values[j - 1], values[n - j]
        stdev: float | None = float(statistics.stdev(values))
        rel = (hi - lo) / 2.0 / abs(median) if median != 0 else None
        return Summary(n, median, lo, hi, coverage, mean, stdev, values[0], values[-1], rel)
    return Summary(n, median, None, None, None, mean, None, values[0], values[-1], None)


@dataclass(frozen=True)
class Comparison:
    """Comparison of a reference ``a`` (old) with a changed ``b`` (new), pyperf-style.

    Attributes:
        a, b: summaries of the two sample sets.
        higher_is_better: direction of the metric (True for throughput).
        norm: ``b.median / a.median`` (pyperf's normalized mean, on medians);
            ``None`` when either median is 0.
        factor: how many times better or worse ``b`` is, always >= 1
            (``1.08`` in "1.08x slower"); ``None`` when ``norm`` is None.
        direction: ``"faster"`` (b better), ``"slower"`` (b worse), ``"same"``
            (equal medians) or ``"undefined"`` (a zero median).
        slowdown: time-like ratio, > 1 when b is worse (pyperf's norm_mean for a
            timing); what the geometric-mean row averages. ``None`` when undefined.
        speedup: seed 001's ``new / old - 1`` (oriented so positive = b better);
            ``None`` when undefined.
        p_value: two-sided Mann-Whitney U p-value on the raw samples.
        alpha: significance level used.
        significant: ``p_value < alpha`` and the medians differ.
    """

    a: Summary
    b: Summary
    higher_is_better: bool
    norm: float | None
    factor: float | None
    direction: Literal["faster", "slower", "same", "undefined"]
    slowdown: float | None
    speedup: float | None
    p_value: float
    alpha: float
    significant: bool

    @property
    def winner(self) -> Literal["a", "b", ""]:
        """``"b"`` when b is significantly better, ``"a"`` when significantly worse, else ``""``."""
        if not self.significant:
            return ""
        return "b" if self.direction == "faster" else "a"


def mann_whitney_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Mann-Whitney U p-value of raw samples ``a`` vs ``b``
    (``scipy.stats.mannwhitneyu``): exact for small samples, also with ties (then an
    exact permutation test, ``scipy.stats.PermutationMethod`` enumerating every split
    of the pooled values, up to :data:`EXACT_SPLITS` of them), else scipy's default
    (exact without ties, normal approximation with them). With ties the normal
    approximation is far off at small n: 3 vs 3 wholly separated samples with tied
    values give p = 0.047 there, where the exact p is 2/20 = 0.1 (no 3 vs 3 comparison
    can reach p < 0.05).

    Returns 1.0 when all values of both samples are equal (no evidence of a
    difference) or scipy yields NaN. Raises ValueError on empty input.
    """
    xa, xb = _check(a, "a"), _check(b, "b")
    if len(set(xa) | set(xb)) == 1:
        return 1.0
    ties = len(set(xa) | set(xb)) < len(xa) + len(xb)
    splits = math.comb(len(xa) + len(xb), len(xa))
    if ties and min(len(xa), len(xb)) < 2 and splits <= EXACT_SPLITS:
        return _single_value_p(xa, xb)  # scipy's permutation test needs 2 values per side
    if ties and splits <= EXACT_SPLITS:
        method: Any = _sp.PermutationMethod(n_resamples=EXACT_SPLITS)
    else:
        method = "auto"
    p = float(_sp.mannwhitneyu(xa, xb, alternative="two-sided", method=method).pvalue)
    return 1.0 if math.isnan(p) else p


def _single_value_p(xa: list[float], xb: list[float]) -> float:
    """The exact two-sided permutation p-value of the Mann-Whitney U statistic when one
    side has a single value (``n + 1`` splits of the pooled values): the share of splits
    whose ``|U - n_a n_b / 2|`` is at least the observed one."""
    pooled, na = xa + xb, len(xa)
    centre = na * len(xb) / 2

    def spread(chosen: tuple[int, ...]) -> float:
        a = [pooled[i] for i in chosen]
        b = [v for i, v in enumerate(pooled) if i not in chosen]
        return abs(float(_sp.mannwhitneyu(a, b, method="asymptotic").statistic) - centre)

    observed = spread(tuple(range(na)))
    every = list(itertools.combinations(range(len(pooled)), na))
    return sum(spread(c) >= observed - 1e-9 for c in every) / len(every)


#: Most splits of the pooled samples :func:`mann_whitney_p` enumerates for an exact
#: test with ties (C(18, 9) = 48,620: up to 9 repeats a side).
EXACT_SPLITS = 50_000


def compare(a: Sequence[float], b: Sequence[float], higher_is_better: bool, *,
            alpha: float = ALPHA, confidence: float = CONFIDENCE) -> Comparison:
    """Compare raw samples of a reference ``a`` (old) with ``b`` (new).

    Args:
        a, b: raw samples (same unit), one per repeat.
        higher_is_better: True for throughput / ops_rate, False for elapsed,
            latency, memory.
        alpha: significance level of the Mann-Whitney U test (default 0.05).
        confidence: CI level for the two summaries.

    Raises:
        ValueError: ``a`` or ``b`` is empty or holds NaN/inf (the message names it).

    Degenerate inputs: n=1 per side is allowed (p = 1.0, never significant); equal
    medians give ``direction="same"``, ``factor=1``, never significant; a zero
    median on either side gives ``direction="undefined"`` and None ratios (the
    p-value is still computed, but ``significant`` is False).
    """
    xa, xb = _check(a, "a"), _check(b, "b")
    sa, sb = summarize(xa, confidence=confidence), summarize(xb, confidence=confidence)
    p = mann_whitney_p(xa, xb)
    if sa.median == 0 or sb.median == 0:
        if sa.median == sb.median:
            return Comparison(sa, sb, higher_is_better, None, 1.0, "same", 1.0, 0.0, p, alpha, False)
        return Comparison(sa, sb, higher_is_better, None, None, "undefined", None, None, p, alpha, False)
    norm = sb.median / sa.median
    slowdown = norm if not higher_is_better else 1.0 / norm
    if slowdown == 1.0:
        direction: Literal["faster", "slower", "same", "undefined"] = "same"
    else:
        direction = "slower" if slowdown > 1.0 else "faster"
    factor = slowdown if slowdown >= 1.0 else 1.0 / slowdown
    speedup = 1.0 / slowdown - 1.0
    significant = direction != "same" and p < alpha
    return Comparison(sa, sb, higher_is_better, norm, factor, direction, slowdown, speedup,
                      p, alpha, significant)


def geometric_mean_slowdown(comparisons: Sequence[Comparison]) -> float | None:
    """Geometric mean of the time-like ratios (``Comparison.slowdown``) of all
    comparisons with a defined ratio, significant or not, as pyperf's
    ``compare_to`` "Geometric mean" row does (``statistics.geometric_mean``).

    Returns None when no comparison has a defined ratio.
    """
    values = [c.slowdown for c in comparisons if c.slowdown is not None]
    if not values:
        return None
    return float(statistics.geometric_mean(values))
