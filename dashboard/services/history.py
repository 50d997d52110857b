"""History: one series' points and the verdicts on them (runner.history), and the
thresholds of the change detection (the request's, else the dashboard settings')."""
from __future__ import annotations

from sqlalchemy.orm import Session

from dashboard.settings import DashboardSettings
from runner.history import Change, Point, SeriesKey, series_changes, series_points


def thresholds(settings: DashboardSettings, alpha: float | None, min_effect: float | None) -> tuple[float, float]:
    """``(alpha, min_effect)``: the given values, each None replaced by the setting
    (``regression_alpha``, ``regression_min_effect``)."""
    return (alpha if alpha is not None else settings.regression_alpha,
            min_effect if min_effect is not None else settings.regression_min_effect)


def series_timeline(session: Session, *, key: SeriesKey, alpha: float, min_effect: float
                    ) -> tuple[list[Point], list[Change]]:
    """``(points, changes)`` of one series: runner.history.series_points (oldest first) and
    series_changes (one verdict per pair of consecutive points). Raises LookupError when
    the series has no point."""
    points = series_points(session, key=key)
    if not points:
        raise LookupError(f"no such series: {key.title} [{key.params_key}]")
    return points, series_changes(key, points, alpha=alpha, min_effect=min_effect)
