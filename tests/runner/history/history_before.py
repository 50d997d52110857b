"""The reference the stored history points and the regression verdicts are checked
against (tests/runner/history/test_points.py), written apart from the code it checks:

* the points aggregated from ``sample`` on each request, one SQL query (primary figures
  and peak memory);
* the verdicts worked out one series at a time with plain reference computations: runs of
  one environment class, step detection by an exhaustive dynamic programme over every
  segmentation (the penalised L1 objective that docs/methodology.md and
  runner.history.changepoint state), scipy's ``mannwhitneyu`` called directly, and
  Benjamini-Hochberg from scipy.

It imports the data types (Point, Change, SeriesKey) and the workload catalogue, none of
the functions it checks. Not used by the lab.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from functools import lru_cache
from itertools import groupby

from scipy.stats import false_discovery_control, mannwhitneyu
from sqlalchemy import Text, and_, cast, func, or_, select
from sqlalchemy.dialects.postgresql import aggregate_order_by

from runner.catalogue.workloads import WORKLOADS
from runner.history.series import Change, Point, SeriesKey
from runner.store.models import Campaign, Cell, Environment, Sample

#: The primary figure's series metric, and the peak-memory series (bytes stored, MiB shown).
PRIMARY = ""
MEMORY_METRICS = ("server_mem_uss", "server_mem_rss_minus_shared")
COST_UNITS = {"server_cpu_per_gib": "s/GiB", "server_cpu_per_op": "us/op",
              # process-tree figures of campaigns stored before the cgroup figure
              "server_cpu_per_gib_tree": "s/GiB", "server_cpu_per_op_tree": "us/op",
              # cgroup figures over the whole phase (cells stored before the span figure)
              "server_cpu_per_gib_phase": "s/GiB", "server_cpu_per_op_phase": "us/op"}
MIB = 1024.0 * 1024.0
#: Runs of fewer points than this get no step detection (the newest pair only).
MIN_DETECT_POINTS = 3
#: The detector's constants: penalty c of beta = c ln(m) / m, and the floor sigma_0 as a
#: fraction of median(|y|), plus an absolute 1e-12.
PENALTY = 4.0
REL_FLOOR = 1e-3

OLD_METRICS = (PRIMARY, *MEMORY_METRICS)


def _track_expr():
    return func.coalesce(Cell.server_spec["label"].astext, cast(Cell.variant, Text))


def _figure_filter(workload_col, metrics=OLD_METRICS):
    parts = []
    if PRIMARY in metrics:
        by_metric: dict[str, list[str]] = defaultdict(list)
        for name, info in WORKLOADS.items():
            by_metric[info.primary].append(name)
        parts.append(and_(Sample.stat == "value",
                          or_(*(and_(workload_col.in_(names), Sample.metric == metric)
                                for metric, names in by_metric.items()))))
    mem = [m for m in metrics if m in MEMORY_METRICS]
    if mem:
        parts.append(and_(Sample.stat == "peak", Sample.metric.in_(mem)))
    return or_(*parts)


def points_query(where=None, *, metrics=OLD_METRICS, window=None, ordered=True):
    track = _track_expr().label("track")
    values = func.array_agg(aggregate_order_by(Sample.value, Cell.seq, Sample.id) if ordered else Sample.value)
    q = (select(Cell.server, track, Cell.workload, Cell.params_key, Sample.metric, Cell.campaign_id,
                Cell.server_version, func.min(Cell.seq), func.min(Cell.server_label), func.max(Environment.env_class),
                values, func.min(Campaign.name), func.min(Campaign.created_at))
         .join(Sample, Sample.cell_id == Cell.id)
         .join(Campaign, Campaign.id == Cell.campaign_id)
         .outerjoin(Environment, Environment.id == Cell.environment_id)
         .where(Cell.status == "done", _figure_filter(Cell.workload, metrics))
         .group_by(Cell.server, track, Cell.workload, Cell.params_key, Sample.metric, Cell.campaign_id,
                   Cell.server_version))
    if where is not None:
        q = q.where(where)
    if window is not None:
        recent = select(Campaign.id).order_by(Campaign.id.desc()).limit(window).subquery()
        q = q.where(Cell.campaign_id >= select(func.min(recent.c.id)).scalar_subquery())
    return q


def points_from_rows(rows) -> dict[SeriesKey, list[Point]]:
    acc: dict[SeriesKey, list[tuple[int, int, Point]]] = defaultdict(list)
    for server, tr, workload, pkey, metric, cid, version, seq, label, env_class, values, cname, created in rows:
        mem = metric in MEMORY_METRICS
        key = SeriesKey(server, tr, workload, pkey, metric if mem else PRIMARY)
        if mem:
            samples = [v / MIB for v in values]
            unit = "MiB"
        else:
            samples = [float(v) for v in values]
            info = WORKLOADS.get(workload)
            unit = info.unit if info else ""
        acc[key].append((cid, seq, Point(cid, cname, created, version or "", label, env_class, unit, samples)))
    return {key: [p for _, _, p in sorted(pts, key=lambda t: (t[0], t[1]))] for key, pts in acc.items()}


def all_points(session, *, window=None) -> dict[SeriesKey, list[Point]]:
    """Every series' points (primary figures and peak memory) aggregated from ``sample``
    by one query (samples in run order)."""
    return points_from_rows(session.execute(points_query(window=window)).all())


def _figure(key: SeriesKey) -> tuple[str, str, bool]:
    """``(sample metric, unit, higher is better)`` of a series: memory and CPU cost are
    lower-is-better; the primary figure is the workload's."""
    if key.metric in COST_UNITS:
        return key.metric, COST_UNITS[key.metric], False
    if key.metric == "capacity":  # sustainable users: more is better
        return key.metric, "users", True
    if key.metric:
        return key.metric, "MiB", False
    info = WORKLOADS[key.workload]
    return info.primary, info.unit, info.higher_is_better


def _worse_by(level_before: float, level_after: float, higher_is_better: bool) -> float | None:
    """Relative change, positive when worse: a 10% drop of a throughput and a 10% rise of
    a time are both +0.1 (as a fraction of the after level for the former). None when a
    level is 0."""
    if level_before == 0 or level_after == 0:
        return None
    if higher_is_better:
        return level_before / level_after - 1.0
    return level_after / level_before - 1.0


def _env_runs(points: list[Point]) -> list[tuple[int, int]]:
    """``[start, end)`` of each stretch of consecutive points with one environment class."""
    out, i = [], 0
    for _, group in groupby(points, key=lambda p: p.env_class):
        n = len(list(group))
        out.append((i, i + n))
        i += n
    assert all(b - a < 2000 for a, b in out), "the reference handles runs shorter than the detector's limit"
    return out


def _l1_cost(y: tuple[float, ...], lo: int, hi: int) -> float:
    """Sum of the absolute deviations of ``y[lo:hi]`` from their median."""
    seg = y[lo:hi]
    mid = statistics.median(seg)
    return sum(abs(v - mid) for v in seg)


@lru_cache(maxsize=4096)
def _steps(y: tuple[float, ...]) -> tuple[int, ...]:
    """Where the levels of ``y`` change: the segmentation minimising
    ``beta * k + ln(sigma_0 + S_k / m)`` over every k and every split into k segments,
    ``S_k`` the least total L1 cost with k segments, ``beta = c ln(m) / m``, ``sigma_0 =
    floor * median(|y|) + 1e-12``. Exhaustive dynamic programme (O(m^3)); on a tie the
    fewer segments, and the earliest split, win. Returns the first index of each segment
    but the first."""
    m = len(y)
    cost = {(lo, hi): _l1_cost(y, lo, hi) for lo in range(m) for hi in range(lo + 1, m + 1)}
    beta = PENALTY * math.log(m) / m
    sigma0 = REL_FLOOR * statistics.median(abs(v) for v in y) + 1e-12
    inf = float("inf")
    # best[k][r]: least cost of y[:r] in k segments; cut[k][r]: where its last segment starts
    best = [[inf] * (m + 1) for _ in range(m + 1)]
    cut = [[0] * (m + 1) for _ in range(m + 1)]
    best[0][0] = 0.0
    for k in range(1, m + 1):
        for r in range(k, m + 1):
            for lo in range(k - 1, r):
                total = best[k - 1][lo] + cost[(lo, r)]
                if total < best[k][r]:
                    best[k][r], cut[k][r] = total, lo
    objective = [beta * k + math.log(sigma0 + best[k][m] / m) for k in range(1, m + 1)]
    k = 1 + objective.index(min(objective))
    starts, r = [], m
    for kk in range(k, 1, -1):
        r = cut[kk][r]
        starts.append(r)
    return tuple(sorted(starts))


def _mann_whitney_p(xa: list[float], xb: list[float]) -> float:
    """Two-sided Mann-Whitney U p-value from scipy (exact for small samples without ties,
    the normal approximation for larger ones). The reference's series have no ties."""
    assert len(set(xa) | set(xb)) == len(xa) + len(xb), "tied samples: not a case the reference covers"
    return float(mannwhitneyu(xa, xb, alternative="two-sided").pvalue)


def series_verdicts(key, points, min_effect):
    """Every pair of consecutive points of one series as a Change, and the tests made:
    ``(index of the pair, p)``. In each environment run: its newest pair, and each step
    the detector finds (runs of MIN_DETECT_POINTS or more), compared segment against
    segment (levels: median of the points' medians; the test: the raw samples of the two
    segments)."""
    metric, unit, hib = _figure(key)
    medians = [float(statistics.median(p.samples)) for p in points]
    changes = []
    for j in range(1, len(points)):
        b, a = points[j - 1], points[j]
        ratio = medians[j] / medians[j - 1] if medians[j - 1] else None
        kind = "same" if b.env_class == a.env_class else "env_changed"
        changes.append(Change(key, b, a, metric, unit, hib, ratio, _worse_by(medians[j - 1], medians[j], hib),
                              None, False, kind))
    tests = []
    for start, end in _env_runs(points):
        m = end - start
        if m < 2:
            continue
        run = medians[start:end]
        steps = list(_steps(tuple(run))) if m >= MIN_DETECT_POINTS else []
        examined = {j: "step" for j in steps}
        examined.setdefault(m - 1, "latest")
        bounds = [0, *steps, m]
        for j in sorted(examined):
            lo = max(s for s in bounds if s < j)
            hi = min(s for s in bounds if s > j)
            ch = changes[start + j - 1]
            ch.method = examined[j]
            ch.level_before = float(statistics.median(run[lo:j]))
            ch.level_after = float(statistics.median(run[j:hi]))
            ch.points_before, ch.points_after = j - lo, hi - j
            ch.effect = _worse_by(ch.level_before, ch.level_after, hib)
            if ch.effect is None or abs(ch.effect) < min_effect:
                continue
            ch.p_value = _mann_whitney_p([v for p in points[start + lo:start + j] for v in p.samples],
                                         [v for p in points[start + j:start + hi] for v in p.samples])
            tests.append((start + j - 1, ch.p_value))
    return changes, tests


def decide(all_changes, all_tests, alpha):
    flat = [(si, ci, p) for si, tests in enumerate(all_tests) for ci, p in tests]
    if not flat:
        return
    qs = false_discovery_control([p for _, _, p in flat], method="bh")
    for (si, ci, _), q in zip(flat, qs):
        ch = all_changes[si][ci]
        ch.q_value = float(q)
        ch.significant = bool(q < alpha)
        if ch.significant:
            ch.kind = "regression" if ch.effect > 0 else "improvement"


def find_regressions(series: dict[SeriesKey, list[Point]], *, alpha=0.05, min_effect=0.05) -> list[Change]:
    """The notable changes of the given series (every kind but ``same``): newest
    ``after`` campaign first, then regressions, improvements, environment changes; ties
    in series order."""
    all_changes, all_tests = [], []
    for key, points in series.items():
        ch, tests = series_verdicts(key, points, min_effect)
        all_changes.append(ch)
        all_tests.append(tests)
    decide(all_changes, all_tests, alpha)
    out = [c for chs in all_changes for c in chs if c.kind != "same"]
    rank = {"regression": 0, "improvement": 1, "env_changed": 2}
    out.sort(key=lambda c: (-c.after.campaign_id, rank[c.kind], c.key.server, c.key.track, c.key.workload,
                            c.key.metric))
    return out
