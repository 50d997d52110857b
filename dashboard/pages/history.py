"""History pages: the series in groups, filtered by server, workload and figure, each
with a sparkline; and one series' chart with the verdict on each step."""
from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Request

from dashboard.deps import FigureName, FilterValues, GroupName, SessionDep, SettingsDep
from dashboard.services.history import GROUPS, group_series, series_view, sparkline, thresholds
from dashboard.templating import render
from runner.history import FIGURES, SPARK_POINTS, SeriesKey, series_facets, series_overview

router = APIRouter(prefix="/history")


@router.get("")
def page_history(request: Request, session: SessionDep, settings: SettingsDep, server: FilterValues = [],  # noqa: B006
                 workload: FilterValues = [], figure: FigureName = "primary",  # noqa: B006
                 group: GroupName = "benchmark"):
    """The series matching the filters (``server``, ``workload``: repeatable, none = any;
    ``figure``: runner.history.FIGURES), grouped by ``group`` (dashboard.services.history.GROUPS)."""
    server, workload = [s for s in server if s], [w for w in workload if w]
    rows = series_overview(session, servers=tuple(server), workloads=tuple(workload), figure=figure)
    for row in rows:
        row["sparkline"] = sparkline(row["spark"])
    facets = series_facets(session)
    return render(request, "history.html", groups=group_series(rows, group), rows=len(rows), facets=facets,
                  chosen={"server": server, "workload": workload, "figure": figure, "group": group},
                  figures={k: v[0] for k, v in FIGURES.items()}, group_names=GROUPS,
                  min_effect=settings.regression_min_effect, spark_points=SPARK_POINTS)


@router.get("/series")
def page_series(request: Request, session: SessionDep, settings: SettingsDep,
                server: str = Query(..., min_length=1, max_length=400), track: str = Query("{}", max_length=400),
                workload: str = Query(..., min_length=1, max_length=400), params_key: str = Query("", max_length=400),
                metric: str = Query("", max_length=40), by: Literal["time", "commit"] = "time"):
    """One series' chart and table, by campaign or (``by=commit``, for a series whose
    builds came from a source) by the server's commit, with the verdict on each step and
    the environment facts that differ."""
    key = SeriesKey(server, track, workload, params_key, metric)
    alpha, min_effect = thresholds(settings, None, None)
    view = series_view(session, key=key, alpha=alpha, min_effect=min_effect, by=by)
    return render(request, "series.html", key=key, **view)
