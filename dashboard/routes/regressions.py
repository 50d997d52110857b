"""Regressions: significant changes between consecutive points of every series."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from sqlalchemy.orm import Session

from dashboard.deps import get_session, get_settings, render, require_read
from runner.history import find_regressions

router = APIRouter()


def _params(request: Request, alpha: float | None, min_effect: float | None) -> tuple[float, float]:
    s = get_settings(request)
    return (alpha if alpha is not None else s.regression_alpha,
            min_effect if min_effect is not None else s.regression_min_effect)


@router.get("/api/regressions", tags=["regressions"], dependencies=[Depends(require_read)])
def api_regressions(request: Request, alpha: float | None = Query(None, gt=0, le=1),
                    min_effect: float | None = Query(None, ge=0, le=100), improvements: bool = True,
                    session: Session = Depends(get_session)) -> dict[str, Any]:
    """Changes between consecutive points of every series: ``regression`` / ``improvement``
    when the two-sided Mann-Whitney U test on the raw samples gives p < ``alpha`` and the
    medians differ by at least ``min_effect`` (relative, 0.05 = 5%); ``env_changed`` when
    the environment class differs (never compared). Defaults from the dashboard settings."""
    a, m = _params(request, alpha, min_effect)
    changes = find_regressions(session, alpha=a, min_effect=m, include_improvements=improvements)
    return JSONResponse({"alpha": a, "min_effect": m, "changes": [c.as_dict() for c in changes]})


@router.get("/regressions", include_in_schema=False, dependencies=[Depends(require_read)])
def page_regressions(request: Request, alpha: float | None = Query(None, gt=0, le=1),
                     min_effect: float | None = Query(None, ge=0, le=100), improvements: bool = True,
                     session: Session = Depends(get_session)):
    a, m = _params(request, alpha, min_effect)
    changes = find_regressions(session, alpha=a, min_effect=m, include_improvements=improvements)
    return render(request, "regressions.html", changes=changes, alpha=a, min_effect=m, improvements=improvements)
