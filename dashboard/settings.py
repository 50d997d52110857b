"""Dashboard settings: :class:`runner.config.Settings` plus the dashboard's own ``XFERLAB_*``
variables (listed with the others in docs/configuration.md)."""
from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from runner.config import Settings


class DashboardSettings(Settings):
    """Settings of the dashboard: every runner setting, and the fields below."""

    model_config = SettingsConfigDict(populate_by_name=True)

    api_token: str | None = None
    """``XFERLAB_API_TOKEN``: the secret that mutating endpoints (launch, cancel) require,
    as ``Authorization: Bearer TOKEN``, an ``X-Xferlab-Token`` header, or the cookie set by
    the login page. No default: when unset, mutating endpoints answer 403 and say so."""

    private: bool = Field(False, validation_alias="XFERLAB_DASHBOARD_PRIVATE")
    """``XFERLAB_DASHBOARD_PRIVATE``: when true, read pages and read API endpoints require
    the token too (default false: reads are open)."""

    regression_alpha: float = Field(0.05, gt=0, le=1)
    """``XFERLAB_REGRESSION_ALPHA``: default false-discovery rate of the regressions page
    (the Benjamini-Hochberg q below which a Mann-Whitney U test counts as a change)."""

    regression_min_effect: float = Field(0.05, ge=0)
    """``XFERLAB_REGRESSION_MIN_EFFECT``: default minimum relative change of the medians
    on the regressions page (0.05 = 5%)."""

    max_body: int = Field(256 * 1024, ge=1024, validation_alias="XFERLAB_DASHBOARD_MAX_BODY")
    """``XFERLAB_DASHBOARD_MAX_BODY``: largest request body accepted, in bytes (default
    262144 = 256 KiB: a spec as JSON or YAML, or an uploaded spec file with its multipart
    framing). A larger ``Content-Length`` is answered 413 before the body is read; a body
    sent without one is cut off at this size with a 413."""
