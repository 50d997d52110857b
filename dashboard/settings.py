"""Dashboard settings: one pydantic-settings class read from ``XFERLAB_*`` variables."""
from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEBIAN_CHARTJS = Path("/usr/share/javascript/chart.js/chart.min.js")


class DashboardSettings(BaseSettings):
    """Settings of the dashboard.

    Attributes:
        api_token: ``XFERLAB_API_TOKEN``; the secret that mutating endpoints (launch,
            cancel) require, as ``Authorization: Bearer TOKEN``, an ``X-Xferlab-Token``
            header, or the cookie set by the login page. No default: when unset,
            mutating endpoints answer 403 and say so.
        private: ``XFERLAB_DASHBOARD_PRIVATE``; when true, read pages and read API
            endpoints require the token too (default false: reads are open).
        chartjs_path: ``XFERLAB_CHARTJS_PATH``; Chart.js 3.x UMD build served as
            ``/static/vendor/chart.min.js`` (default: Debian's libjs-chart.js file).
        regression_alpha: ``XFERLAB_REGRESSION_ALPHA``; default significance level of
            the Mann-Whitney U test on the regressions page (0.05).
        regression_min_effect: ``XFERLAB_REGRESSION_MIN_EFFECT``; default minimum
            relative change of the medians (0.05 = 5%).
    """

    model_config = SettingsConfigDict(env_prefix="XFERLAB_", extra="ignore")

    api_token: str | None = None
    private: bool = Field(False, validation_alias="XFERLAB_DASHBOARD_PRIVATE")
    chartjs_path: Path = DEBIAN_CHARTJS
    regression_alpha: float = Field(0.05, gt=0, le=1)
    regression_min_effect: float = Field(0.05, ge=0)
