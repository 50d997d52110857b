"""Request dependencies: the settings, the engine, a database session per request, and the
typed path and query parameters of campaign and bisect ids and of the history filters."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from fastapi import Depends, Query, Request
from fastapi import Path as PathParam
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from dashboard.settings import DashboardSettings

INT4_MAX = 2**31 - 1  # campaign ids are PostgreSQL ``integer`` (int4)
CampaignId = Annotated[int, PathParam(ge=1, le=INT4_MAX, description="campaign id")]
BisectId = Annotated[int, PathParam(ge=1, le=INT4_MAX, description="bisect id")]
OptionalCampaign = Annotated[int | None, Query(ge=1, le=INT4_MAX, description="campaign id")]
CampaignQuery = Annotated[int, Query(ge=1, le=INT4_MAX, description="campaign id")]
#: The history figure filter (the keys of runner.history.FIGURES; a test keeps them equal).
FigureName = Literal["primary", "server_mem_uss", "server_mem_rss_minus_shared", "server_cpu", "capacity", "all"]
#: The history page's groupings (the keys of dashboard.services.history.GROUPS; a test keeps them equal).
GroupName = Literal["benchmark", "server", "workload", "figure"]
#: A history filter's values: server or workload names as ``series_point`` stores them (at
#: most 40 characters, at most 50 values); ``""`` (a form's "any") is dropped by the routes.
FilterValues = Annotated[list[Annotated[str, Query(max_length=40)]], Query(max_length=50)]


class PageError(Exception):
    """An error to show to the user: HTTP ``status`` and a one-line ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def get_settings(request: Request) -> DashboardSettings:
    """The app's DashboardSettings (``app.state.settings``)."""
    return request.app.state.settings


def get_engine(request: Request) -> Engine:
    """The app's engine: the one given to create_app, else runner.store.db.get_engine()
    (XFERLAB_DATABASE_URL or the embedded PostgreSQL), created on first use.

    Raises PageError(503) when the database cannot be reached."""
    engine = request.app.state.engine
    if engine is None:
        from runner.store.db import DatabaseError
        from runner.store.db import get_engine as _get

        try:
            engine = _get()
        except DatabaseError as exc:
            raise PageError(503, f"database unavailable: {exc}") from None
        request.app.state.engine = engine
    return engine


def get_session(engine: Annotated[Engine, Depends(get_engine)]) -> Iterator[Session]:
    """A session per request (read-mostly; writers commit through the store helpers)."""
    with sessionmaker(engine, expire_on_commit=False)() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]
"""A route parameter ``session: SessionDep`` gets the request's database session."""

SettingsDep = Annotated[DashboardSettings, Depends(get_settings)]
"""A route parameter ``settings: SettingsDep`` gets the app's DashboardSettings."""
