"""History: one timeline per (server, track, workload, parameters) series across campaigns."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from dashboard.deps import get_session, get_settings, render, require_read
from runner.history import SeriesKey, list_series, series_changes, series_points

router = APIRouter()



def _key(server: str, track: str, workload: str, params_key: str, metric: str = "") -> SeriesKey:
    return SeriesKey(server, track, workload, params_key, metric)


@router.get("/api/history/series", tags=["history"], dependencies=[Depends(require_read)])
def api_series(session: Session = Depends(get_session)) -> list[dict[str, Any]]:
    """Every series: ``server``, ``track`` (spec label, else the variant JSON),
    ``workload``, ``params_key``, ``metric`` (``""``: the workload's primary figure;
    ``server_mem_uss`` / ``server_mem_rss_minus_shared``: peak memory, MiB;
    ``server_cpu_per_gib`` / ``server_cpu_per_op``: server CPU per unit of work, s/GiB or
    us/op), ``title``, ``benchmark`` (the title without server and track), ``unit``,
    number of ``points``, ``last_campaign``."""
    return list_series(session)


@router.get("/api/history", tags=["history"], dependencies=[Depends(require_read)],
            response_model=dict[str, Any])
def api_history(request: Request, server: str = Query(..., min_length=1, max_length=400),
                track: str = Query("{}", max_length=400),
                workload: str = Query(..., min_length=1, max_length=400), params_key: str = Query("", max_length=400),
                metric: str = Query("", max_length=40),
                alpha: float | None = Query(None, gt=0, le=1), min_effect: float | None = Query(None, ge=0),
                session: Session = Depends(get_session)) -> JSONResponse:
    """One series' timeline: points (campaign, version, env_class, n, median, CI
    bounds, raw samples) oldest first, and the verdict on each pair of consecutive
    points (kind; for steps found by the step detector and the newest point: segment
    levels, effect, Mann-Whitney U p-value and its Benjamini-Hochberg ``q_value``;
    ``env_changed`` when the environment class differs). ``metric``: ``""`` (primary
    figure), a memory metric or a server CPU cost metric (as ``/api/history/series``
    lists them; another is 422). 404 when the series has no point."""
    s = get_settings(request)
    key = _key(server, track, workload, params_key, metric)
    points = series_points(session, key=key)
    if not points:
        raise LookupError(f"no such series: {key.title} [{params_key}]")
    changes = series_changes(key, points, alpha=alpha or s.regression_alpha,
                             min_effect=s.regression_min_effect if min_effect is None else min_effect)
    # JSONResponse directly: the payload is plain JSON types, jsonable_encoder would walk it for nothing
    return JSONResponse({"series": key.as_dict(), "title": key.title, "unit": points[0].unit,
                         "points": [p.as_dict() for p in points], "changes": [c.as_dict() for c in changes]})


@router.get("/history", include_in_schema=False, dependencies=[Depends(require_read)])
def page_history(request: Request, session: Session = Depends(get_session)):
    return render(request, "history.html", series=list_series(session))


@router.get("/history/series", include_in_schema=False, dependencies=[Depends(require_read)])
def page_series(request: Request, server: str = Query(..., min_length=1, max_length=400),
                track: str = Query("{}", max_length=400),
                workload: str = Query(..., min_length=1, max_length=400), params_key: str = Query("", max_length=400),
                metric: str = Query("", max_length=40), session: Session = Depends(get_session)):
    s = get_settings(request)
    key = _key(server, track, workload, params_key, metric)
    points = series_points(session, key=key)
    if not points:
        raise LookupError(f"no such series: {key.title} [{params_key}]")
    changes = series_changes(key, points, alpha=s.regression_alpha, min_effect=s.regression_min_effect)
    return render(request, "series.html", key=key, points=points, changes=changes,
                  chart={"unit": points[0].unit, "points": [p.as_dict() for p in points],
                         "env_changed": [False] + [c.kind == "env_changed" for c in changes]})
