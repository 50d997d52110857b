"""History pages: the list of series and one series' chart with the verdict on each step."""
from __future__ import annotations

from fastapi import APIRouter, Query, Request

from dashboard.deps import SessionDep, SettingsDep
from dashboard.services.history import series_timeline, thresholds
from dashboard.templating import render
from runner.history import SeriesKey, list_series

router = APIRouter(prefix="/history")


@router.get("")
def page_history(request: Request, session: SessionDep):
    return render(request, "history.html", series=list_series(session))


@router.get("/series")
def page_series(request: Request, session: SessionDep, settings: SettingsDep,
                server: str = Query(..., min_length=1, max_length=400), track: str = Query("{}", max_length=400),
                workload: str = Query(..., min_length=1, max_length=400), params_key: str = Query("", max_length=400),
                metric: str = Query("", max_length=40)):
    key = SeriesKey(server, track, workload, params_key, metric)
    alpha, min_effect = thresholds(settings, None, None)
    points, changes = series_timeline(session, key=key, alpha=alpha, min_effect=min_effect)
    return render(request, "series.html", key=key, points=points, changes=changes,
                  chart={"unit": points[0].unit, "points": [p.as_dict() for p in points],
                         "env_changed": [False] + [c.kind == "env_changed" for c in changes]})
