"""Reading series from the store: which series exist, and the points of one or all of them
(samples aggregated per point in PostgreSQL)."""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import Text, and_, cast, func, literal, or_, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from runner.history.series import MEMORY_METRICS, MIB, PRIMARY, SERIES_METRICS, Point, SeriesKey
from runner.store.models import Campaign, Cell, Environment, Sample
from runner.workloads import CLASSIC_SUITE, WORKLOADS


def _track_expr():
    """SQL expression of a cell's track: the spec label if given, else the variant as
    jsonb text (PostgreSQL's canonical form, e.g. ``{"use_sendfile": false}``)."""
    return func.coalesce(Cell.server_spec["label"].astext, cast(Cell.variant, Text))


def _figure_filter(workload_col, metrics: tuple[str, ...] = SERIES_METRICS):
    """WHERE clause selecting the samples of the given series metrics: each workload's
    primary figure (stat ``value``) for ``""``, the ``peak`` stat of memory metrics."""
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


def list_series(session: Session) -> list[dict[str, Any]]:
    """Every series with at least one done cell carrying its figure, with its number of
    points and last campaign.

    Returns dicts ``{server, track, workload, params_key, metric, title, points,
    last_campaign}`` ordered by server, track, classic-suite order of the workload,
    params_key, then the primary figure before the memory ones."""
    track = _track_expr().label("track")
    rows = session.execute(
        select(Cell.server, track, Cell.workload, Cell.params_key, Sample.metric,
               func.count(func.distinct(func.concat(Cell.campaign_id, literal(":"), Cell.server_version))),
               func.max(Cell.campaign_id))
        .join(Sample, Sample.cell_id == Cell.id)
        .where(Cell.status == "done", _figure_filter(Cell.workload))
        .group_by(Cell.server, track, Cell.workload, Cell.params_key, Sample.metric)).all()
    order = {w: i for i, w in enumerate(CLASSIC_SUITE)}
    morder = {m: i for i, m in enumerate(SERIES_METRICS)}
    out: list[dict[str, Any]] = []
    for server, tr, workload, pkey, metric, npoints, last in rows:
        k = SeriesKey(server, tr, workload, pkey, metric if metric in MEMORY_METRICS else PRIMARY)
        out.append({**k.as_dict(), "title": k.title, "points": int(npoints), "last_campaign": int(last)})
    out.sort(key=lambda d: (d["server"], d["track"], order.get(d["workload"], 99), d["params_key"],
                            morder[d["metric"]]))
    return out


def _points_query(where=None, *, metrics: tuple[str, ...] = SERIES_METRICS, window: int | None = None,
                  ordered: bool = True):
    """One row per (series, point): ``(server, track, workload, params_key, sample metric,
    campaign_id, version, first seq, label, env_class, values, campaign name,
    created_at)``. The samples are aggregated in PostgreSQL (array_agg; in run order when
    ``ordered``), so one row per point crosses the wire instead of one per sample. With
    ``window`` only the cells of the ``window`` most recent campaigns (highest ids) count."""
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


def _points_from_rows(rows) -> dict[SeriesKey, list[Point]]:
    """Group :func:`_points_query` rows into ordered points per series (oldest campaign
    first; within a campaign, in the order its servers ran)."""
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


def series_points(session: Session, *, key: SeriesKey) -> list[Point]:
    """The points of one series, oldest campaign first (within a campaign, in the
    order its servers ran). Returns [] for an unknown series. Raises nothing else."""
    where = and_(Cell.server == key.server, Cell.workload == key.workload, Cell.params_key == key.params_key,
                 _track_expr() == key.track)
    rows = session.execute(_points_query(where, metrics=(key.metric,))).all()
    return _points_from_rows(rows).get(key, [])
