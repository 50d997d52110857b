"""History: the overview of every series in groups with a sparkline each, one series'
points and the verdicts on them (runner.history), and the thresholds of the change
detection (the request's, else the dashboard settings')."""
from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from dashboard.settings import DashboardSettings
from runner.catalogue.workloads import CLASSIC_SUITE, WORKLOADS
from runner.history import SERIES_METRICS, SeriesKey, series_changes, series_points
from runner.history.bycommit import series_by_commit
from runner.history.provenance import Source, fact_diff, point_contexts
from runner.history.series import DEFAULT_TRACK

#: Workloads in the order the pages list them: the classic suite, then the catalogue's.
WORKLOAD_ORDER = {w: i for i, w in enumerate(dict.fromkeys((*CLASSIC_SUITE, *WORKLOADS)))}
METRIC_ORDER = {m: i for i, m in enumerate(SERIES_METRICS)}


def thresholds(settings: DashboardSettings, alpha: float | None, min_effect: float | None) -> tuple[float, float]:
    """``(alpha, min_effect)``: the given values, each None replaced by the setting
    (``regression_alpha``, ``regression_min_effect``)."""
    return (alpha if alpha is not None else settings.regression_alpha,
            min_effect if min_effect is not None else settings.regression_min_effect)


#: How a series page orders its points: ``by`` value -> what it orders by.
ORDERS: dict[str, str] = {"time": "campaign", "commit": "server commit"}


def series_view(session: Session, *, key: SeriesKey, alpha: float, min_effect: float, by: str) -> dict[str, Any]:
    """What the series page shows, ordered by campaign (``by="time"``) or by the server's
    source commit (``by="commit"``, runner.history.bycommit; only points built from a
    source). Returns ``{"points", "changes", "diffs" (per change, the facts that differ),
    "sources" (per point, its Source or None), "has_commits" (some point has a source),
    "left_out" (points without a source, by commit), "by", "chart"}``; ``chart`` is the
    timeline's JSON: unit, points, env_changed, and ``commits`` (per point: short, commit,
    subject, date) by commit. Raises LookupError when the series has no point, ValueError
    for an unknown ``by``."""
    if by not in ORDERS:
        raise ValueError(f"unknown order {by!r}: use one of {', '.join(ORDERS)}")
    points = series_points(session, key=key)
    if not points:
        raise LookupError(f"no such series: {key.title} [{key.params_key}]")
    contexts = point_contexts(session, key=key, points=points)
    has_commits = any(c.source is not None for c in contexts)
    if by == "commit" and has_commits:
        cs = series_by_commit(session, key=key, points=points, alpha=alpha, min_effect=min_effect)
        pts, changes, diffs, left_out = cs.points, cs.changes, cs.diffs, cs.left_out
        sources: list[Source | None] = list(cs.sources)
    else:
        by = "time"
        pts, changes = points, series_changes(key, points, alpha=alpha, min_effect=min_effect)
        diffs = [fact_diff(contexts[i].facts, contexts[i + 1].facts) for i in range(len(changes))]
        sources, left_out = [c.source for c in contexts], 0
    chart: dict[str, Any] = {"unit": pts[0].unit, "points": [p.as_dict() for p in pts],
                             "env_changed": [False] + [c.kind == "env_changed" for c in changes], "axis": by}
    if by == "commit":
        chart["commits"] = [{"short": s.short, "commit": s.commit, "subject": s.subject, "date": s.author_date}
                            for s in sources if s is not None]
    return {"points": pts, "changes": changes, "diffs": diffs, "sources": sources, "has_commits": has_commits,
            "left_out": left_out, "by": by, "chart": chart}


#: How the history page groups its series: ``group`` value -> what it groups by.
GROUPS: dict[str, str] = {"benchmark": "benchmark (workload, parameters, figure)", "server": "server and track",
                          "workload": "workload", "figure": "figure"}
#: Series rows the history page opens at first; the groups past them start folded.
OPEN_ROWS = 40


def _group_of(row: dict[str, Any], by: str) -> tuple[tuple[Any, ...], str, str]:
    """``(sort key, heading, sub-heading)`` of the group of an overview row under ``by``."""
    work = WORKLOAD_ORDER.get(row["workload"], len(WORKLOAD_ORDER))
    metric = METRIC_ORDER[row["metric"]]
    if by == "server":
        track = "" if row["track_text"] == DEFAULT_TRACK else row["track_text"]
        return (row["server"], row["track"]), f"{row['server']} {track}".strip(), ""
    if by == "workload":
        return (work, row["workload"]), WORKLOADS[row["workload"]].generic_title() \
            if row["workload"] in WORKLOADS else row["workload"], row["workload"]
    if by == "figure":
        return (metric, row["figure"]), row["figure"], ""
    title = f"{row['workload_title']}: {row['figure']}"
    return (work, row["workload"], row["params_key"], metric), title, row["params_key"]


def group_series(rows: list[dict[str, Any]], by: str, open_rows: int = OPEN_ROWS) -> list[dict[str, Any]]:
    """The overview ``rows`` (runner.history.series_overview) in groups by ``by`` (a key of
    :data:`GROUPS`), the rows of a group in their given order.

    Returns ``[{"key": str (stable id), "title", "subtitle", "rows", "open": bool}]`` in
    catalogue order (servers alphabetically); ``open``: the first group, and each next one
    while the open rows stay within ``open_rows``. Raises ValueError for an unknown ``by``."""
    if by not in GROUPS:
        raise ValueError(f"unknown grouping {by!r}: use one of {', '.join(GROUPS)}")
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        sort, title, subtitle = _group_of(row, by)
        g = groups.setdefault(sort, {"title": title, "subtitle": subtitle, "rows": []})
        g["rows"].append(row)
    out, shown = [], 0
    for i, (_, g) in enumerate(sorted(groups.items(), key=lambda kv: kv[0])):
        shown += len(g["rows"])
        out.append({**g, "key": f"g{i}", "open": i == 0 or shown <= open_rows})
    return out


def sparkline(values: list[float], width: float = 120.0, height: float = 28.0, pad: float = 3.0) -> dict[str, Any]:
    """The SVG geometry of a sparkline of ``values`` (oldest first) in a ``width`` x
    ``height`` box, ``pad`` units kept free on each side: ``{"points": "x,y x,y ..."}``
    (a polyline, y growing downwards: the largest value on top), ``last`` (the newest
    point's ``(x, y)``), ``low`` and ``high`` (the values at the bottom and top edges).
    One value is drawn at mid-height; equal values as a flat line at mid-height.
    Raises ValueError for no value."""
    if not values:
        raise ValueError("a sparkline needs at least one value")
    low, high = min(values), max(values)
    span = high - low
    step = (width - 2 * pad) / max(1, len(values) - 1)

    def y(v: float) -> float:
        return height / 2 if span == 0 else pad + (high - v) / span * (height - 2 * pad)

    pts = [(pad + i * step if len(values) > 1 else width / 2, y(v)) for i, v in enumerate(values)]
    return {"points": " ".join(f"{x:.1f},{yy:.1f}" for x, yy in pts), "last": pts[-1], "low": low, "high": high,
            "width": width, "height": height}
