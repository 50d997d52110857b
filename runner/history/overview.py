"""The overview of many series at once (the history page): every series that matches a
filter on server, workload and figure, each with the medians of its most recent points
(what a sparkline draws), its newest median and the relative change from the point
before. One SQL statement reads them from ``series_point`` (runner.store.points): the
median of each point's samples is computed by PostgreSQL (``percentile_cont(0.5)``, the
same value as Python's ``statistics.median``: the mean of the two middle values for an
even count), so no sample array leaves the database.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from runner.catalogue.workloads import CLASSIC_SUITE, WORKLOADS
from runner.history.series import (
                                   COST_METRICS,
                                   MEMORY_METRICS,
                                   MIB,
                                   PRIMARY,
                                   SERIES_METRICS,
                                   SeriesKey,
                                   benchmark_title,
                                   track_text,
)
from runner.store.models import SeriesPoint

#: The figure filter of the overview: name -> (what it shows, the series metrics it keeps).
FIGURES: dict[str, tuple[str, tuple[str, ...]]] = {
    "primary": ("the workload's figure (throughput, time, requests/s)", (PRIMARY,)),
    "server_mem_uss": ("server memory, peak USS (MiB)", ("server_mem_uss",)),
    "server_mem_rss_minus_shared": ("server memory, peak rss - shared (MiB)", ("server_mem_rss_minus_shared",)),
    "server_cpu": ("server CPU per unit of work (s/GiB, us/op)", tuple(COST_METRICS)),
    "capacity": ("sustainable users at a service level (users)", ("capacity",)),
    "all": ("every figure", SERIES_METRICS),
}
#: Most recent points of each series returned for its sparkline.
SPARK_POINTS = 50


def figure_name(key: SeriesKey) -> str:
    """The figure of a series in words with its unit, e.g. ``throughput (MiB/s)``,
    ``server memory, peak USS (MiB)``, ``server CPU per GiB (s/GiB)``."""
    metric, unit, _ = key.figure
    if key.metric in COST_METRICS:
        return f"{COST_METRICS[key.metric][0]} ({unit})"
    if key.metric in MEMORY_METRICS:
        return f"server memory, {MEMORY_METRICS[key.metric]} ({unit})"
    return f"{metric.replace('_', ' ')} ({unit})"


def series_overview(session: Session, *, servers: tuple[str, ...] = (), workloads: tuple[str, ...] = (),
                    figure: str = "all", spark: int = SPARK_POINTS) -> list[dict[str, Any]]:
    """The series whose server is in ``servers`` and workload in ``workloads`` (an empty
    tuple: any) and whose metric belongs to ``figure`` (a key of :data:`FIGURES`).

    Returns dicts ordered as runner.history.list_series orders them: ``{server, track,
    workload, params_key, metric}`` (the series key, as ``/api/history`` takes it),
    ``title``, ``benchmark``, ``workload_title`` (the benchmark without the figure:
    :func:`runner.history.series.benchmark_title`), ``track_text`` (:func:`runner.history.series.track_text`),
    ``figure`` (:func:`figure_name`), ``unit``, ``higher_is_better``, ``points`` (how many
    the series has), ``last_campaign``, ``spark`` (the medians of its ``spark`` most recent
    points, oldest first, in ``unit``: MiB for memory), ``last`` (the newest median),
    ``previous`` (the one before, or None) and ``change`` (``last / previous - 1``, None
    without a previous point or when it is 0).

    Raises ValueError for an unknown ``figure`` or a ``spark`` below 1."""
    if figure not in FIGURES:
        raise ValueError(f"unknown figure {figure!r}: use one of {', '.join(FIGURES)}")
    if spark < 1:
        raise ValueError(f"spark must be at least 1, got {spark}")
    sp = SeriesPoint
    key_cols = (sp.server, sp.track, sp.workload, sp.params_key, sp.metric)
    value = func.unnest(sp.samples).column_valued("v")
    median = select(func.percentile_cont(0.5).within_group(value)).scalar_subquery()
    where = [sp.metric.in_(FIGURES[figure][1])]
    if servers:
        where.append(sp.server.in_(servers))
    if workloads:
        where.append(sp.workload.in_(workloads))
    ranked = (select(*key_cols, sp.campaign_id, median.label("median"),
                     func.row_number().over(partition_by=key_cols, order_by=(sp.campaign_id.desc(), sp.seq.desc()))
                     .label("rank"),
                     func.count().over(partition_by=key_cols).label("n"),
                     func.max(sp.campaign_id).over(partition_by=key_cols).label("last"))
              .where(*where).subquery())
    rows = session.execute(select(ranked).where(ranked.c.rank <= spark)).all()
    by_series: dict[tuple[str, ...], list[Any]] = {}
    for r in rows:
        by_series.setdefault(tuple(r[:5]), []).append(r)
    order = {w: i for i, w in enumerate(CLASSIC_SUITE)}
    out = []
    for (server, track, workload, pkey, metric), group in by_series.items():
        key = SeriesKey(server, track, workload, pkey, metric)
        _, unit, higher = key.figure
        scale = MIB if metric in MEMORY_METRICS else 1.0
        group.sort(key=lambda r: r.rank, reverse=True)  # oldest first
        medians = [float(r.median) / scale for r in group]
        last, previous = medians[-1], medians[-2] if len(medians) > 1 else None
        out.append({**key.as_dict(), "title": key.title, "benchmark": key.benchmark,
                    "workload_title": benchmark_title(workload, pkey), "track_text": track_text(track),
                    "figure": figure_name(key), "unit": unit, "higher_is_better": higher,
                    "points": int(group[0].n), "last_campaign": int(group[0].last), "spark": medians,
                    "last": last, "previous": previous,
                    "change": last / previous - 1 if previous else None})
    morder = {m: i for i, m in enumerate(SERIES_METRICS)}
    out.sort(key=lambda d: (str(d["server"]), str(d["track"]), order.get(str(d["workload"]), 99), str(d["workload"]),
                            str(d["params_key"]), morder[str(d["metric"])]))
    return out


def series_facets(session: Session) -> dict[str, list[str]]:
    """What the overview's filters can choose from: ``{"servers": [server names],
    "workloads": [workload names]}`` of the stored series, sorted (workloads in
    catalogue order)."""
    sp = SeriesPoint
    servers = sorted(session.scalars(select(sp.server).distinct()))
    found = set(session.scalars(select(sp.workload).distinct()))
    workloads = [w for w in WORKLOADS if w in found] + sorted(found - set(WORKLOADS))
    return {"servers": servers, "workloads": workloads}
