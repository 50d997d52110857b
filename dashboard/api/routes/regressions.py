"""``/api/regressions``: significant steps and newest-point changes of every series (runner.history)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from dashboard.deps import SessionDep, SettingsDep
from dashboard.services.history import thresholds
from runner.history import DEFAULT_WINDOW, find_regressions
from runner.history.alerts import annotate

router = APIRouter(prefix="/api/regressions", tags=["regressions"])


@router.get("", response_model=dict[str, Any])
def api_regressions(session: SessionDep, settings: SettingsDep, alpha: float | None = Query(None, gt=0, le=1),
                    min_effect: float | None = Query(None, ge=0, le=100), improvements: bool = True,
                    window: int = Query(DEFAULT_WINDOW, ge=2, le=2000)) -> JSONResponse:
    """Significant changes in the ``window`` most recent campaigns of every series
    (primary figures, peak memory, server CPU per unit of work): steps found by the step detector and the newest
    point of each series, ``regression`` / ``improvement`` when the levels differ by at
    least ``min_effect`` (relative, 0.05 = 5%) and the Mann-Whitney U p-value, adjusted
    by Benjamini-Hochberg across every test, is below ``alpha`` (``q_value``);
    ``env_changed`` when the environment class differs (never compared). Defaults from
    the dashboard settings; method in docs/methodology.md. Each change also carries
    ``env_diff`` (the environment and build facts that differ between its two sides),
    and ``false_alarm_rate``, ``noise_floor``, ``calibration``: from the newest A/A
    calibration of its figure in the after side's environment class, the rate at these
    thresholds (None when uncalibrated)."""
    a, m = thresholds(settings, alpha, min_effect)
    changes = find_regressions(session, alpha=a, min_effect=m, include_improvements=improvements, window=window)
    return JSONResponse({"alpha": a, "min_effect": m, "window": window,
                         "changes": [a.as_dict() for a in annotate(session, changes, alpha=a, min_effect=m)]})
