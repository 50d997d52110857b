"""``/api/history``: every series, and one series' timeline with the verdict on each step
(runner.history)."""
from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from dashboard.deps import FigureName, FilterValues, SessionDep, SettingsDep
from dashboard.services.history import series_view, thresholds
from runner.history import SeriesKey, series_overview

router = APIRouter(prefix="/api/history", tags=["history"])


@router.get("/series")
def api_series(session: SessionDep, server: FilterValues = [], workload: FilterValues = [],  # noqa: B006
               figure: FigureName = "all") -> list[dict[str, Any]]:
    """Every series matching the filters (``server``, ``workload``: repeatable, none = any;
    ``figure``: ``primary``, ``server_mem_uss``, ``server_mem_rss_minus_shared``,
    ``server_cpu`` or ``all``, the default): ``server``, ``track`` (spec label, else the
    variant JSON), ``workload``, ``params_key``, ``metric`` (``""``: the workload's primary
    figure; ``server_mem_uss`` / ``server_mem_rss_minus_shared``: peak memory, MiB;
    ``server_cpu_per_gib`` / ``server_cpu_per_op``: server CPU per unit of work, s/GiB or
    us/op; with ``_tree``: the same of cells whose server CPU is a process-tree sum; with
    ``_phase``: of cgroup figures over the whole phase, set-up and teardown included),
    ``title``, ``benchmark`` (the title without server and track), ``workload_title``
    (``benchmark`` without the figure), ``track_text``
    (the track as shown: ``default``, ``use_sendfile=false``, a label), ``figure`` (in
    words), ``unit``, ``higher_is_better``, number of ``points``, ``last_campaign``,
    ``spark`` (the medians of the 50 most recent points, oldest first), ``last``,
    ``previous`` (None for one point) and ``change`` (``last / previous - 1``)."""
    return series_overview(session, servers=tuple(s for s in server if s), workloads=tuple(w for w in workload if w),
                           figure=figure)


@router.get("", response_model=dict[str, Any])
def api_history(session: SessionDep, settings: SettingsDep, server: str = Query(..., min_length=1, max_length=400),
                track: str = Query("{}", max_length=400),
                workload: str = Query(..., min_length=1, max_length=400), params_key: str = Query("", max_length=400),
                metric: str = Query("", max_length=40),
                alpha: float | None = Query(None, gt=0, le=1), min_effect: float | None = Query(None, ge=0),
                by: Literal["time", "commit"] = "time") -> JSONResponse:
    """One series' timeline: points (campaign, version, env_class, n, median, CI
    bounds, raw samples) oldest first, and the verdict on each pair of consecutive
    points (kind; for steps found by the step detector and the newest point: segment
    levels, effect, Mann-Whitney U p-value and its Benjamini-Hochberg ``q_value``;
    ``env_changed`` when the environment class differs). ``metric``: ``""`` (primary
    figure), a memory metric or a server CPU cost metric (as ``/api/history/series``
    lists them; another is 422). 404 when the series has no point. Each change carries
    ``env_diff``: the environment and build facts that differ between its two points
    (``[{name, before, after}]``). ``by=commit``: only the points built from a source, in
    commit order (runner.history.bycommit), each with its ``source``, each change with
    its ``first_commit``; ``by`` in the answer says which order was used (``time`` when no
    point has a source)."""
    key = SeriesKey(server, track, workload, params_key, metric)
    a, m = thresholds(settings, alpha, min_effect)
    view = series_view(session, key=key, alpha=a, min_effect=m, by=by)
    points, srcs = [], view["sources"]
    for p, src in zip(view["points"], srcs):
        d = p.as_dict()
        d["source"] = src.as_dict() if src is not None else None
        points.append(d)
    changes = []
    for i, (c, diff) in enumerate(zip(view["changes"], view["diffs"])):
        d = c.as_dict()
        d["env_diff"] = [x.as_dict() for x in diff]
        if view["by"] == "commit":
            d["first_commit"] = srcs[i + 1].as_dict()
        changes.append(d)
    # JSONResponse directly: the payload is plain JSON types, jsonable_encoder would walk it for nothing
    return JSONResponse({"series": key.as_dict(), "title": key.title, "unit": view["points"][0].unit,
                         "by": view["by"], "left_out": view["left_out"], "points": points, "changes": changes})
