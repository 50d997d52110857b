"""The regressions page: significant steps and newest-point changes of every series (runner.history)."""
from __future__ import annotations

from fastapi import APIRouter, Query, Request

from dashboard.deps import SessionDep, SettingsDep
from dashboard.services.history import thresholds
from dashboard.templating import render
from runner.history import DEFAULT_WINDOW, find_regressions

router = APIRouter()


@router.get("/regressions")
def page_regressions(request: Request, session: SessionDep, settings: SettingsDep,
                     alpha: float | None = Query(None, gt=0, le=1),
                     min_effect: float | None = Query(None, ge=0, le=100), improvements: bool = True,
                     window: int = Query(DEFAULT_WINDOW, ge=2, le=2000)):
    a, m = thresholds(settings, alpha, min_effect)
    changes = find_regressions(session, alpha=a, min_effect=m, include_improvements=improvements, window=window)
    from dashboard.services.profiles import regression_links

    return render(request, "regressions.html", changes=changes, flame_links=regression_links(session, changes),
                  alpha=a, min_effect=m, improvements=improvements, window=window)
