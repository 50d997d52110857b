"""The history reads as they were before ``series_point`` (commit db9c604), kept as the
reference the stored points are checked against (tests/runner/history/test_points.py):
the points aggregated from ``sample`` on each request (primary figures and peak memory,
the only series then), and the verdict code that took one series at a time.

Copied, not imported: this is what the new path must reproduce. Not used by the lab.
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from scipy.stats import false_discovery_control
from sqlalchemy import Text, and_, cast, func, or_, select
from sqlalchemy.dialects.postgresql import aggregate_order_by

from runner.catalogue.workloads import WORKLOADS
from runner.history.changepoint import detect_steps, step_indices
from runner.history.changes import _oriented, _runs
from runner.history.series import MEMORY_METRICS, MIB, MIN_DETECT_POINTS, PRIMARY, Change, Point, SeriesKey
from runner.report.stats import mann_whitney_p
from runner.store.models import Campaign, Cell, Environment, Sample

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
    """Every series' points as the old query gave them (samples in run order)."""
    return points_from_rows(session.execute(points_query(window=window)).all())


def series_verdicts(key, points, min_effect):
    metric, unit, hib = key.figure
    medians = [p.median for p in points]
    changes = []
    for j in range(1, len(points)):
        b, a = points[j - 1], points[j]
        ratio = medians[j] / medians[j - 1] if medians[j - 1] else None
        kind = "env_changed" if b.env_class != a.env_class else "same"
        changes.append(Change(key, b, a, metric, unit, hib, ratio, _oriented(medians[j - 1], medians[j], hib),
                              None, False, kind))
    tests = []
    for start, end in _runs(points):
        m = end - start
        if m < 2:
            continue
        run = medians[start:end]
        steps = step_indices(detect_steps(run)) if m >= MIN_DETECT_POINTS else []
        candidates = {j: "step" for j in steps}
        candidates.setdefault(m - 1, "latest")
        for j, method in sorted(candidates.items()):
            lo = max([0] + [s for s in steps if s < j])
            hi = min([m] + [s for s in steps if s > j])
            lb = float(statistics.median(run[lo:j]))
            la = float(statistics.median(run[j:hi]))
            ch = changes[start + j - 1]
            ch.method, ch.level_before, ch.level_after = method, lb, la
            ch.points_before, ch.points_after = j - lo, hi - j
            ch.effect = _oriented(lb, la, hib)
            if ch.effect is None or abs(ch.effect) < min_effect:
                continue
            xa = [v for p in points[start + lo:start + j] for v in p.samples]
            xb = [v for p in points[start + j:start + hi] for v in p.samples]
            ch.p_value = mann_whitney_p(xa, xb)
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
    """The old find_regressions on the given points (every kind but ``same``), in the
    old order: newest ``after`` campaign first, regressions, improvements, environment
    changes; ties in series order."""
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
