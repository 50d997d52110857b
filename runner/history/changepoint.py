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
* :func:`detect_steps_many` fits many series of one length together (the same
  operations with a leading series axis, so each series gets exactly the fit it gets
  alone): the regressions page fits a hundred series of the same window, where one
  call per series spends its time in numpy's per-call overhead.
* unweighted points and no AR(1) noise term (asv weights points by 1/CI and fits an
  autocorrelation); ``sigma_0 = rel_floor * median(|y|)`` (default 0.1% of the level,
  asv: 0.1% of the level for one segment, else a tenth of the smallest step).

The false-positive rate on pure noise is measured by
``tests/runner/history/test_stepdetect.py`` (1,000 seeded series) and stated in
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


def _costs(a: np.ndarray) -> np.ndarray:
    """:func:`segment_costs` of each row of ``a`` (``B x m``, checked): ``B x m x m``.
    Every operation is per row, so a row's costs are those it would get alone."""
    b, m = a.shape
    order = np.argsort(a, axis=1, kind="stable")
    rank = np.empty((b, m), dtype=np.int64)
    np.put_along_axis(rank, order, np.broadcast_to(np.arange(m), (b, m)), axis=1)
    ys = np.take_along_axis(a, order, axis=1)
    ind = np.arange(m)[None, None, :] >= rank[:, :, None]  # ind[b, j, v] = rank[b, j] <= v
    cnt = np.zeros((b, m + 1, m), dtype=np.int16 if m < 32000 else np.int32)
    np.cumsum(ind, axis=1, out=cnt[:, 1:])
    sm = np.zeros((b, m + 1, m))
    np.cumsum(ind * a[:, :, None], axis=1, out=sm[:, 1:])
    cflat, sflat = cnt.ravel(), sm.ravel()
    li, ri, h, odd, lo_row, hi_row, steps = _windows(m)
    idx = np.int32 if cflat.size < 2**31 else np.int64  # half the memory traffic of the search
    row0 = (np.arange(b, dtype=idx) * ((m + 1) * m))[:, None]  # flat offset of each series' tables
    lo_at, hi_at = (row0 + lo_row).astype(idx), (row0 + hi_row).astype(idx)
    lo = np.zeros((b, li.size), dtype=idx)
    hi = np.full((b, li.size), m - 1, dtype=idx)
    for _ in range(steps):
        mid = (lo + hi) >> 1
        ok = (cflat.take(hi_at + mid) - cflat.take(lo_at + mid)) > h
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + 1)
    v = lo
    vb = np.maximum(v - 1, 0)
    low = np.where(v > 0, sflat.take(hi_at + vb) - sflat.take(lo_at + vb), 0.0)
    total = np.concatenate((np.zeros((b, 1)), np.cumsum(a, axis=1)), axis=1)
    cost = (total[:, ri + 1] - total[:, li]) - 2.0 * low - np.where(odd, np.take_along_axis(ys, v, axis=1), 0.0)
    out = np.full((b, m, m), np.inf)
    out[:, li, ri] = np.maximum(cost, 0.0)  # >= 0 despite rounding
    return out


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
    return _costs(_check(y)[None, :])[0]


def _check_params(penalty: float, rel_floor: float) -> None:
    if not penalty > 0:
        raise ValueError(f"penalty must be > 0, got {penalty}")
    if not rel_floor >= 0:
        raise ValueError(f"rel_floor must be >= 0, got {rel_floor}")


def _fit(a: np.ndarray, penalty: float, rel_floor: float, kmax: int) -> list[list[Segment]]:
    """The fit of :func:`detect_steps` for each row of ``a`` (``B x m``, checked, m >= 2),
    all rows at once: the same dynamic programme, row by row in numpy's vector
    operations, each row stopping where it would alone (its own bound on ``k``)."""
    b, m = a.shape
    cost = _costs(a)
    beta = penalty * math.log(m) / m
    sigma0 = [rel_floor * v + 1e-12 for v in np.median(np.abs(a), axis=1).tolist()]
    # f[b, r] = best cost of y[0..r] in k segments; back[k][b, r] = start of the last segment
    f = cost[:, 0].copy()
    backs: list[np.ndarray] = [np.zeros((b, m), dtype=np.int64)]
    best_k = [1] * b
    best_obj = [beta + math.log(sigma0[i] + f[i, m - 1] / m) for i in range(b)]
    active = set(range(b))
    for k in range(2, kmax + 1):
        active = {i for i in active if beta * k + math.log(sigma0[i]) < best_obj[i]}
        if not active:
            break  # ln(sigma0 + S/m) >= ln(sigma0): no k' >= k can beat best_obj of any row
        prev = np.concatenate((np.full((b, 1), np.inf), f[:, :-1]), axis=1)  # prev[l]: y[0..l-1] in k-1
        tot = prev[:, :, None] + cost  # tot[b, l, r]: last segment y[l..r]
        back = np.argmin(tot, axis=1)
        f = np.take_along_axis(tot, back[:, None, :], axis=1)[:, 0, :]
        backs.append(back)
        last = f[:, m - 1]
        for i in list(active):
            if not np.isfinite(last[i]):
                active.discard(i)
                continue
            obj = beta * k + math.log(sigma0[i] + max(float(last[i]), 0.0) / m)
            if obj < best_obj[i] - 1e-12:
                best_k[i], best_obj[i] = k, obj
    out = []
    for i in range(b):
        bounds = []
        r = m - 1
        for k in range(best_k[i], 0, -1):
            start = int(backs[k - 1][i, r]) if k > 1 else 0
            bounds.append((start, r))
            r = start - 1
        bounds.reverse()
        row = a[i].tolist()
        out.append([Segment(s, e + 1, _median(row[s:e + 1]), float(cost[i, s, e])) for s, e in bounds])
    return out


def _median(values: list[float]) -> float:
    """Median of a non-empty list, as ``np.median`` gives it (the middle value, or the
    mean of the two middle ones), without numpy's per-call overhead on short slices."""
    v = sorted(values)
    h = len(v) // 2
    return v[h] if len(v) % 2 else (v[h - 1] + v[h]) / 2.0


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
    _check_params(penalty, rel_floor)
    a = _check(y)
    m = a.size
    kmax = m if max_segments is None else max(1, min(int(max_segments), m))
    if m == 1:
        return [Segment(0, 1, float(a[0]), 0.0)]
    return _fit(a[None, :], penalty, rel_floor, kmax)[0]


#: Size of one batch of :func:`detect_steps_many`, in cells of the ``m x m`` cost
#: matrices: ``160_000 // m**2`` series at once (64 of 50 points, 4 of 200). Larger
#: batches of long series are slower (memory-bound, measured on 128 series: m = 50,
#: 64 per batch 78 ms, 1 per batch 216 ms; m = 200, 4 per batch 817 ms, 16 per batch
#: 1,874 ms; CPU time on the 2-core lab machine).
BATCH_CELLS = 160_000


def detect_steps_many(ys: Sequence[Sequence[float]], *, penalty: float = DEFAULT_PENALTY,
                      rel_floor: float = DEFAULT_REL_FLOOR) -> list[list[Segment]]:
    """:func:`detect_steps` of each series of ``ys`` (same results, one list of segments
    per series, in order), the series of equal length fitted together in numpy's
    vector operations: the regressions page fits a hundred series of the same window,
    where one call per series spends its time in numpy's per-call overhead.

    Raises ValueError as :func:`detect_steps` (naming the index of a bad series)."""
    _check_params(penalty, rel_floor)
    arrays = []
    for i, y in enumerate(ys):
        try:
            arrays.append(_check(y))
        except ValueError as exc:
            raise ValueError(f"series {i}: {exc}") from None
    out: list[list[Segment]] = [[] for _ in arrays]
    by_len: dict[int, list[int]] = {}
    for i, a in enumerate(arrays):
        if a.size == 1:
            out[i] = [Segment(0, 1, float(a[0]), 0.0)]
        else:
            by_len.setdefault(a.size, []).append(i)
    for m, idx in by_len.items():
        per = max(1, BATCH_CELLS // (m * m))
        for j in range(0, len(idx), per):
            part = idx[j:j + per]
            for i, segs in zip(part, _fit(np.stack([arrays[i] for i in part]), penalty, rel_floor, m)):
                out[i] = segs
    return out


def step_indices(segments: Sequence[Segment]) -> list[int]:
    """Indices where a new level starts (``segments[1:]`` starts): the steps."""
    return [s.start for s in segments[1:]]
