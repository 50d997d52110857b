"""Finding changes in series: runs of comparable points, step detection, effect, and the
Mann-Whitney U tests under Benjamini-Hochberg FDR control (package docstring of
:mod:`runner.history`)."""
from __future__ import annotations

import statistics

from scipy.stats import false_discovery_control
from sqlalchemy.orm import Session

from runner.history.changepoint import MAX_POINTS, detect_steps_many, step_indices
from runner.history.query import load_points
from runner.history.series import (
    DEFAULT_ALPHA,
    DEFAULT_MIN_EFFECT,
    DEFAULT_WINDOW,
    MIN_DETECT_POINTS,
    SERIES_METRICS,
    Change,
    Point,
    SeriesKey,
)
from runner.report.stats import mann_whitney_p


def _check_params(alpha: float, min_effect: float) -> None:
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    if min_effect < 0:
        raise ValueError(f"min_effect must be >= 0, got {min_effect}")


def _oriented(before: float, after: float, hib: bool) -> float | None:
    if not before or not after:
        return None
    return (before / after - 1.0) if hib else (after / before - 1.0)


def _runs(points: list[Point]) -> list[tuple[int, int]]:
    """``[start, end)`` index ranges of consecutive points of one environment class,
    each at most MAX_POINTS long (longer runs are cut into pieces of MAX_POINTS)."""
    out, start = [], 0
    for i in range(1, len(points) + 1):
        if i == len(points) or points[i].env_class != points[i - 1].env_class or i - start >= MAX_POINTS:
            out.append((start, i))
            start = i
    return out


def _change(key: SeriesKey, points: list[Point], medians: list[float], j: int) -> Change:
    """The preliminary change between ``points[j-1]`` and ``points[j]`` (kind ``same``
    or ``env_changed``; not a candidate)."""
    metric, unit, hib = key.figure
    b, a = points[j - 1], points[j]
    ratio = medians[j] / medians[j - 1] if medians[j - 1] else None
    kind = "env_changed" if b.env_class != a.env_class else "same"
    return Change(key, b, a, metric, unit, hib, ratio, _oriented(medians[j - 1], medians[j], hib), None, False, kind)


def _run_steps(medians: list[list[float]], runs: list[list[tuple[int, int]]]
               ) -> list[dict[tuple[int, int], list[int]]]:
    """Per series, ``{(run start, run end): step indices in the run}`` of each of its runs
    of at least MIN_DETECT_POINTS points, all series fitted in one call (detect_steps_many)."""
    todo = [(si, start, end) for si, rs in enumerate(runs) for start, end in rs if end - start >= MIN_DETECT_POINTS]
    fits = detect_steps_many([medians[si][start:end] for si, start, end in todo])
    out: list[dict[tuple[int, int], list[int]]] = [{} for _ in runs]
    for (si, start, end), segs in zip(todo, fits):
        out[si][(start, end)] = step_indices(segs)
    return out


def _series_verdicts(key: SeriesKey, points: list[Point], medians: list[float], runs: list[tuple[int, int]],
                     steps: dict[tuple[int, int], list[int]], min_effect: float, every_pair: bool
                     ) -> tuple[dict[int, Change], list[tuple[int, float]]]:
    """Preliminary changes of one series, by index ``j - 1`` of the pair ``(j-1, j)``
    (kinds ``same`` or ``env_changed``): every pair when ``every_pair``, else only the
    pairs whose environment changed and the candidates (the others are never
    reported); and the tests made: ``(index, Mann-Whitney p)``. ``runs``: :func:`_runs`;
    ``steps``: the step indices of each run of MIN_DETECT_POINTS points or more."""
    hib = key.figure[2]
    changes = {j - 1: _change(key, points, medians, j) for j in range(1, len(points))
               if every_pair or points[j - 1].env_class != points[j].env_class}
    tests: list[tuple[int, float]] = []
    for start, end in runs:
        m = end - start
        if m < 2:
            continue
        run = medians[start:end]
        run_steps = steps.get((start, end), [])
        candidates = {j: "step" for j in run_steps}
        candidates.setdefault(m - 1, "latest")
        for j, method in sorted(candidates.items()):
            lo = max([0] + [s for s in run_steps if s < j])
            hi = min([m] + [s for s in run_steps if s > j])
            lb = float(statistics.median(run[lo:j]))
            la = float(statistics.median(run[j:hi]))
            ch = changes.get(start + j - 1) or changes.setdefault(start + j - 1, _change(key, points, medians,
                                                                                         start + j))
            ch.method, ch.level_before, ch.level_after = method, lb, la
            ch.points_before, ch.points_after = j - lo, hi - j
            ch.effect = _oriented(lb, la, hib)
            if ch.effect is None or abs(ch.effect) < min_effect:
                continue  # below the minimum effect nothing can be significant: not tested
            xa = [v for p in points[start + lo:start + j] for v in p.samples]
            xb = [v for p in points[start + j:start + hi] for v in p.samples]
            ch.p_value = mann_whitney_p(xa, xb)
            tests.append((start + j - 1, ch.p_value))
    return changes, tests


def _verdicts(series: list[tuple[SeriesKey, list[Point]]], min_effect: float, every_pair: bool
              ) -> tuple[list[dict[int, Change]], list[list[tuple[int, float]]]]:
    """:func:`_series_verdicts` of each series, the step detection of all their runs done
    at once."""
    medians = [[p.median for p in points] for _, points in series]
    runs = [_runs(points) for _, points in series]
    steps = _run_steps(medians, runs)
    all_changes, all_tests = [], []
    for si, (key, points) in enumerate(series):
        ch, tests = _series_verdicts(key, points, medians[si], runs[si], steps[si], min_effect, every_pair)
        all_changes.append(ch)
        all_tests.append(tests)
    return all_changes, all_tests


def _decide(all_changes: list[dict[int, Change]], all_tests: list[list[tuple[int, float]]], alpha: float) -> None:
    """Benjamini-Hochberg over every test of every series, then the kinds."""
    flat = [(si, ci, p) for si, tests in enumerate(all_tests) for ci, p in tests]
    if not flat:
        return
    qs = false_discovery_control([p for _, _, p in flat], method="bh")
    for (si, ci, _), q in zip(flat, qs):
        ch = all_changes[si][ci]
        ch.q_value = float(q)
        ch.significant = bool(q < alpha)
        if ch.significant:
            ch.kind = "regression" if ch.effect > 0 else "improvement"  # type: ignore[operator]


def compare_points(key: SeriesKey, before: Point, after: Point, *, alpha: float = DEFAULT_ALPHA,
                   min_effect: float = DEFAULT_MIN_EFFECT) -> Change:
    """The verdict on two points taken alone (a series of two points, see the module
    docstring): one candidate, tested with Mann-Whitney U (one test: q = p).

    Raises ValueError when alpha is not in (0, 1] or min_effect < 0."""
    return series_changes(key, [before, after], alpha=alpha, min_effect=min_effect)[0]


def series_changes(key: SeriesKey, points: list[Point], *, alpha: float = DEFAULT_ALPHA,
                   min_effect: float = DEFAULT_MIN_EFFECT) -> list[Change]:
    """The verdict on each pair of consecutive points of one series (len(points) - 1
    changes; the Benjamini-Hochberg family is this series' tests).

    Raises ValueError when alpha is not in (0, 1] or min_effect < 0."""
    _check_params(alpha, min_effect)
    changes, tests = _verdicts([(key, points)], min_effect, every_pair=True)
    _decide(changes, tests, alpha)
    return [changes[0][i] for i in range(len(points) - 1)]


def find_regressions(session: Session, *, alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT,
                     include_improvements: bool = True, include_env_changes: bool = True,
                     window: int | None = DEFAULT_WINDOW, metrics: tuple[str, ...] = SERIES_METRICS
                     ) -> list[Change]:
    """Significant changes (and environment changes) of every series, newest ``after``
    campaign first, regressions before improvements.

    Args:
        alpha: false-discovery rate (Benjamini-Hochberg, over every test of every
            series examined), in (0, 1].
        min_effect: minimum relative change of the levels (0.05 = 5%), >= 0.
        include_improvements: also list significant improvements.
        include_env_changes: also list consecutive points whose environment class differs.
        window: examine the points of the ``window`` most recent campaigns (highest
            ids, >= 2), or whole series when None.
        metrics: series metrics examined (``""`` primary figure, memory metrics, CPU
            cost metrics; default all).

    Raises ValueError for an out-of-range alpha, min_effect or window, or an unknown metric."""
    _check_params(alpha, min_effect)
    if window is not None and not 2 <= window:
        raise ValueError(f"window must be >= 2 campaigns (or None for whole series), got {window}")
    series = load_points(session, metrics=tuple(metrics), window=window)
    return _notable(series, alpha, min_effect, include_improvements, include_env_changes)


def _notable(series: dict[SeriesKey, list[Point]], alpha: float, min_effect: float, include_improvements: bool,
             include_env_changes: bool) -> list[Change]:
    """:func:`find_regressions` on the points of ``series`` (parameters checked)."""
    all_changes, all_tests = _verdicts(list(series.items()), min_effect, every_pair=False)
    _decide(all_changes, all_tests, alpha)
    out = [c for chs in all_changes for c in (chs[i] for i in sorted(chs))
           if c.kind == "regression" or (include_improvements and c.kind == "improvement")
           or (include_env_changes and c.kind == "env_changed")]
    rank = {"regression": 0, "improvement": 1, "env_changed": 2}
    out.sort(key=lambda c: (-c.after.campaign_id, rank[c.kind], c.key.server, c.key.track, c.key.workload,
                            c.key.params_key, c.key.metric))
    return out
