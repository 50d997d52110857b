"""Reading series from the store: which series exist, and the points of one or all of
them, from ``series_point`` (the points kept at store time, runner.store.points)."""
from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from runner.catalogue.workloads import CLASSIC_SUITE
from runner.history.series import MEMORY_METRICS, MIB, SERIES_METRICS, Point, SeriesKey
from runner.store.models import Campaign, SeriesPoint


def _check_metrics(metrics: tuple[str, ...]) -> None:
    bad = [m for m in metrics if m not in SERIES_METRICS]
    if bad or not metrics:
        raise ValueError(f"unknown series metric(s) {bad}: use any of {list(SERIES_METRICS)}")


def list_series(session: Session) -> list[dict[str, Any]]:
    """Every series with at least one point (a done cell carrying its figure), with its
    number of points, last campaign and unit.

    Returns dicts ``{server, track, workload, params_key, metric, title, benchmark, unit,
    points, last_campaign}`` (``benchmark``: the title without server and track), ordered
    by server, track, classic-suite order of the workload, params_key, then the primary
    figure, the memory ones, the CPU cost ones."""
    sp = SeriesPoint
    rows = session.execute(
        select(sp.server, sp.track, sp.workload, sp.params_key, sp.metric, func.count(), func.max(sp.campaign_id))
        .group_by(sp.server, sp.track, sp.workload, sp.params_key, sp.metric)).all()
    order = {w: i for i, w in enumerate(CLASSIC_SUITE)}
    morder = {m: i for i, m in enumerate(SERIES_METRICS)}
    out: list[dict[str, Any]] = []
    for server, tr, workload, pkey, metric, npoints, last in rows:
        k = SeriesKey(server, tr, workload, pkey, metric)
        out.append({**k.as_dict(), "title": k.title, "benchmark": k.benchmark, "unit": k.figure[1],
                    "points": int(npoints), "last_campaign": int(last)})
    out.sort(key=lambda d: (d["server"], d["track"], order.get(d["workload"], 99), d["params_key"],
                            morder[d["metric"]]))
    return out


def _points_query(*where, metrics: tuple[str, ...] = SERIES_METRICS, window: int | None = None):
    """One row per (series, point): ``(server, track, workload, params_key, metric,
    campaign_id, seq, version, label, env_class, samples)`` from ``series_point``, in no
    particular order (sorting on the text columns took PostgreSQL longer than the
    rest of the query). With ``window`` only the points of the ``window`` most recent
    campaigns (highest ids)."""
    sp = SeriesPoint
    q = (select(sp.server, sp.track, sp.workload, sp.params_key, sp.metric, sp.campaign_id, sp.seq, sp.version,
                sp.label, sp.env_class, sp.samples)
         .where(sp.metric.in_(metrics), *where))
    if window is not None:
        recent = select(Campaign.id).order_by(Campaign.id.desc()).limit(window).subquery()
        q = q.where(sp.campaign_id >= select(func.min(recent.c.id)).scalar_subquery())
    return q


def _campaigns(session: Session, ids: set[int]) -> dict[int, tuple[str, Any]]:
    """``{campaign id: (name, created_at)}`` of ``ids``."""
    if not ids:
        return {}
    rows = session.execute(select(Campaign.id, Campaign.name, Campaign.created_at).where(Campaign.id.in_(ids)))
    return {cid: (name, created) for cid, name, created in rows}


def load_points(session: Session, *where, metrics: tuple[str, ...] = SERIES_METRICS,
                window: int | None = None) -> dict[SeriesKey, list[Point]]:
    """The points of every series matching ``where`` (conditions on ``series_point``)
    among ``metrics``, grouped by series, oldest campaign first (within a campaign, in
    the order its servers ran). Memory figures are converted from bytes to MiB.

    Raises ValueError for an unknown metric."""
    _check_metrics(metrics)
    rows = _fetch_binary(session, _points_query(*where, metrics=metrics, window=window))
    camps = _campaigns(session, {r[5] for r in rows})
    by_series: dict[tuple, list[tuple]] = {}
    for r in rows:
        by_series.setdefault(r[:5], []).append(r)
    out: dict[SeriesKey, list[Point]] = {}
    for (server, tr, workload, pkey, metric), group in sorted(by_series.items(), key=lambda kv: kv[0]):
        key = SeriesKey(server, tr, workload, pkey, metric)
        mem, unit = metric in MEMORY_METRICS, key.figure[1]
        group.sort(key=lambda r: (r[5], r[6]))  # oldest campaign first, then in run order
        pts = out[key] = []
        for r in group:
            cid, values = r[5], r[10]  # binary float8[]: a list of floats already
            name, created = camps[cid]
            pts.append(Point(cid, name, created, r[7] or "", r[8], r[9], unit,
                             [v / MIB for v in values] if mem else list(values)))
    return out


def _fetch_binary(session: Session, stmt) -> list[tuple]:
    """Rows of ``stmt`` as tuples, read in PostgreSQL's binary format: parsing the
    text form of the float arrays took most of the client's time (32,000 floats of the
    regressions page: 25 ms of CPU in text, 6 ms in binary, psycopg 3.3 on the lab
    machine). SQLAlchemy compiles the statement; the session's connection (and
    transaction) runs it through a psycopg cursor with ``binary=True``. Errors are
    raised as SQLAlchemy's (``sqlalchemy.exc.DataError`` for a value PostgreSQL refuses,
    such as a NUL byte in text), as any other query's."""
    import psycopg

    compiled = stmt.compile(dialect=session.get_bind().dialect, compile_kwargs={"render_postcompile": True})
    sql, params = str(compiled), compiled.params
    dbapi = session.connection().connection.driver_connection
    if dbapi is None:  # pragma: no cover - a live connection always has its driver connection
        raise RuntimeError("the session's connection has no psycopg connection")
    try:
        with dbapi.cursor(binary=True) as cur:
            cur.execute(sql, params)
            return cur.fetchall()
    except psycopg.Error as exc:
        raise DBAPIError.instance(sql, params, exc, psycopg.Error) from exc


def series_points(session: Session, *, key: SeriesKey) -> list[Point]:
    """The points of one series, oldest campaign first (within a campaign, in the
    order its servers ran). Returns [] for an unknown series. Raises nothing else."""
    sp = SeriesPoint
    return load_points(session, sp.server == key.server, sp.workload == key.workload,
                       sp.params_key == key.params_key, sp.track == key.track,
                       metrics=(key.metric,)).get(key, [])
