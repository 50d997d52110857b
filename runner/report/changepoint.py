"""Step (change-point) detection in a series of per-campaign medians.

Model and method
----------------
The series ``y_0 .. y_{m-1}`` (one value per campaign, oldest first: the median of its
repeats) is taken to be piecewise constant plus noise. We fit the piecewise-constant
function that minimises a penalised **L1** criterion::

    obj(k) = beta * k + ln(sigma_0 + S_k / m),     beta = c * ln(m) / m

where ``S_k`` is the smallest total absolute deviation ``sum_r sum_{i in r} |y_i - mu_r|``
reachable with ``k`` segments (``mu_r`` is the segment's median, the L1 optimum), and
``sigma_0`` a measurement floor. This is the objective of asv's step detection
(``asv/step_detect.py``, airspeed velocity, BSD licence; read for the method, not
copied): a Laplace-noise likelihood with unknown scale, whose maximum gives
``m ln(S_k/m)``, and a Schwarz/Bayesian information penalty per segment, after
Y.-C. Yao, "Estimating the number of change-points via Schwarz' criterion",
Statistics & Probability Letters 6 (1988) 181-189; asv takes ``c = 4`` ("4 degrees of
freedom per breakpoint"), and so do we by default. The L1 cost makes one wild campaign
cost what its distance costs, not its square (robust fit, as in F. Friedrich et al.,
"Complexity Penalized M-Estimation: Fast Computation", JCGS 17 (2008) 201-224).

Differences from asv, on purpose:

* exact rather than approximate: for every ``k`` up to ``max_segments`` the optimal
  ``k``-segment L1 fit is computed by dynamic programming over all segmentations
  (segment neighbourhood, I. E. Auger and C. E. Lawrence, Bull. Math. Biol. 51 (1989)
  39-54), and ``obj(k)`` is minimised over ``k`` directly; asv searches the penalty
  ``gamma`` of the Potts problem with a windowed approximate solver. The search stops
  early once ``beta * k`` alone exceeds the best objective minus ``ln(sigma_0)`` (no
  larger ``k`` can win), so it is exact within ``max_segments``.
* every segment cost ``sum |y_i - median|`` of every ``(l, r)`` is computed at once with
  numpy (ranks, prefix counts and prefix sums; a vectorised binary search finds each
  window's median): O(m^2 log m) time, O(m^2) memory, so a 250-point series costs
  about a millisecond.
* unweighted points and no AR(1) noise term (asv weights points by 1/CI and fits an
  autocorrelation); ``sigma_0 = rel_floor * median(|y|)`` (default 0.1% of the level,
  asv: 0.1% of the level for one segment, else a tenth of the smallest step).

The false-positive rate on pure noise is measured by
``tests/runner/report/test_changepoint.py`` (1,000 seeded series) and stated in
docs/methodology.md.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

#: Default penalty constant ``c`` of ``beta = c * ln(m) / m`` (asv's default).
DEFAULT_PENALTY = 4.0
#: Default measurement floor relative to the series' median level.
DEFAULT_REL_FLOOR = 1e-3
#: Largest series handled at once (the cost matrix is m x m float64: 32 MB at 2,000).
MAX_POINTS = 2000


@dataclass(frozen=True)
class Segment:
    """One constant piece of the fit: points ``start`` (inclusive) to ``end`` (exclusive),
    level ``level`` (median of ``y[start:end]``), ``cost`` = sum of ``|y_i - level|``."""

    start: int
    end: int
    level: float
    cost: float


def _check(y: Sequence[float] | np.ndarray) -> np.ndarray:
    a = np.asarray(y, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"y must be a 1-d sequence of numbers, got shape {a.shape}")
    if a.size == 0:
        raise ValueError("y is empty: at least one point is needed")
    if a.size > MAX_POINTS:
        raise ValueError(f"y has {a.size} points; at most {MAX_POINTS} are handled at once (O(m^2) memory)")
    if not np.all(np.isfinite(a)):
        raise ValueError("y contains NaN or infinite values")
    return a


@lru_cache(maxsize=64)
def _windows(m: int):
    """Index arrays of every window ``[l, r]`` of ``m`` points (cached per ``m``):
    l, r, h = n // 2, n odd, flat row offsets of l and r + 1, binary-search steps."""
    li, ri = np.triu_indices(m)
    n = ri - li + 1
    for a in (li, ri):
        a.setflags(write=False)
    return li, ri, n // 2, (n % 2) == 1, li * m, (ri + 1) * m, max(1, math.ceil(math.log2(m))) + 1


def segment_costs(y: Sequence[float] | np.ndarray) -> np.ndarray:
    """L1 cost of every window ``y[l..r]`` (inclusive), all at once.

    Returns ``cost``, an ``m x m`` float array indexed ``[l, r]``, valid for ``l <= r``
    (``inf`` below the diagonal): ``cost[l, r] = sum(|y_i - median(y[l:r+1])|)``.
    Raises ValueError on empty, non-finite or too long input.

    How: with ranks ``rk`` of ``y`` and ``ys = sort(y)``, ``cnt[i, v]`` = number of
    ``j < i`` with ``rk[j] <= v`` and ``sm[i, v]`` their sum. A window of ``n`` values
    has its ``(h+1)``-th smallest (``h = n // 2``) at ``ys[v]`` for the least ``v`` with
    ``cnt[r+1, v] - cnt[l, v] > h`` (binary search, vectorised over all windows); the sum
    of its ``h`` smallest values is then ``low = sm[r+1, v-1] - sm[l, v-1]``, and the cost
    is ``total - 2 * low`` for even ``n`` (upper half minus lower half) or
    ``total - 2 * low - ys[v]`` for odd ``n`` (the median itself in neither half)."""
    a = _check(y)
    m = a.size
    order = np.argsort(a, kind="stable")
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m)
    ys = a[order]
    ind = np.arange(m)[None, :] >= rank[:, None]  # ind[j, v] = rank[j] <= v
    cnt = np.zeros((m + 1, m), dtype=np.int16 if m < 32000 else np.int32)
    np.cumsum(ind, axis=0, out=cnt[1:])
    sm = np.zeros((m + 1, m))
    np.cumsum(ind * a[:, None], axis=0, out=sm[1:])
    cflat, sflat = cnt.ravel(), sm.ravel()
    li, ri, h, odd, lo_row, hi_row, steps = _windows(m)
    lo = np.zeros(li.size, dtype=np.int64)
    hi = np.full(li.size, m - 1, dtype=np.int64)
    for _ in range(steps):
        mid = (lo + hi) >> 1
        ok = (cflat[hi_row + mid] - cflat[lo_row + mid]) > h
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + 1)
    v = lo
    vb = np.maximum(v - 1, 0)
    low = np.where(v > 0, sflat[hi_row + vb] - sflat[lo_row + vb], 0.0)
    total = np.concatenate(([0.0], np.cumsum(a)))
    cost = (total[ri + 1] - total[li]) - 2.0 * low - np.where(odd, ys[v], 0.0)
    out = np.full((m, m), np.inf)
    out[li, ri] = np.maximum(cost, 0.0)  # >= 0 despite rounding
    return out


def detect_steps(y: Sequence[float], *, penalty: float = DEFAULT_PENALTY, rel_floor: float = DEFAULT_REL_FLOOR,
                 max_segments: int | None = None) -> list[Segment]:
    """Fit the piecewise-constant L1 model (module docstring) to ``y``.

    Args:
        y: one value per point (e.g. the median of each campaign), oldest first.
        penalty: ``c`` of ``beta = c * ln(m) / m`` per segment (> 0; larger = fewer steps).
        rel_floor: measurement floor ``sigma_0`` as a fraction of ``median(|y|)`` (>= 0;
            an absolute floor of 1e-12 is always added).
        max_segments: most segments considered (default ``m``).

    Returns the segments in order (one segment = no step); a step is the boundary
    between two consecutive segments, at index ``segments[i].end``.

    Raises ValueError on empty, non-finite or too long ``y`` or a bad parameter."""
    if not penalty > 0:
        raise ValueError(f"penalty must be > 0, got {penalty}")
    if not rel_floor >= 0:
        raise ValueError(f"rel_floor must be >= 0, got {rel_floor}")
    a = _check(y)
    m = a.size
    kmax = m if max_segments is None else max(1, min(int(max_segments), m))
    if m == 1:
        return [Segment(0, 1, float(a[0]), 0.0)]
    cost = segment_costs(a)
    beta = penalty * math.log(m) / m
    sigma0 = rel_floor * float(np.median(np.abs(a))) + 1e-12
    # f[r] = best cost of y[0..r] in k segments; back[k][r] = start of the last segment
    f = cost[0].copy()
    backs: list[np.ndarray] = [np.zeros(m, dtype=np.int64)]
    best_k, best_obj = 1, beta + math.log(sigma0 + f[m - 1] / m)
    for k in range(2, kmax + 1):
        if beta * k + math.log(sigma0) >= best_obj:
            break  # ln(sigma0 + S/m) >= ln(sigma0): no k' >= k can beat best_obj
        prev = np.concatenate(([np.inf], f[:-1]))  # prev[l] = best cost of y[0..l-1] in k-1 segments
        tot = prev[:, None] + cost  # tot[l, r]: last segment y[l..r]
        back = np.argmin(tot, axis=0)
        f = tot[back, np.arange(m)]
        backs.append(back)
        if not np.isfinite(f[m - 1]):
            break
        obj = beta * k + math.log(sigma0 + max(f[m - 1], 0.0) / m)
        if obj < best_obj - 1e-12:
            best_k, best_obj = k, obj
    # backtrack
    bounds = []
    r = m - 1
    for k in range(best_k, 0, -1):
        start = int(backs[k - 1][r]) if k > 1 else 0
        bounds.append((start, r))
        r = start - 1
    bounds.reverse()
    return [Segment(s, e + 1, float(np.median(a[s:e + 1])), float(cost[s, e])) for s, e in bounds]


def step_indices(segments: Sequence[Segment]) -> list[int]:
    """Indices where a new level starts (``segments[1:]`` starts): the steps."""
    return [s.start for s in segments[1:]]
