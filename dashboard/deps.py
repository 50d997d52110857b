"""Shared request dependencies: database sessions, the token check, templates, errors."""
from __future__ import annotations

import hmac
from collections.abc import Iterator
from pathlib import Path

from fastapi import Depends, HTTPException, Request
from fastapi.templating import Jinja2Templates
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from dashboard.settings import DashboardSettings

TEMPLATES_DIR = Path(__file__).parent / "templates"
STATIC_DIR = Path(__file__).parent / "static"
TOKEN_COOKIE = "xferlab_token"

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))


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


def get_session(engine: Engine = Depends(get_engine)) -> Iterator[Session]:
    """A session per request (read-mostly; writers commit through the store helpers)."""
    with sessionmaker(engine, expire_on_commit=False)() as session:
        yield session


def given_token(request: Request) -> str | None:
    """The token the client sent: ``Authorization: Bearer T``, ``X-Xferlab-Token: T``, or the login cookie."""
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.headers.get("x-xferlab-token") or request.cookies.get(TOKEN_COOKIE)


def token_ok(request: Request) -> bool:
    """True when a token is configured and the client sent it (constant-time compare)."""
    token = get_settings(request).api_token
    given = given_token(request)
    return bool(token) and given is not None and hmac.compare_digest(given.encode(), token.encode())


def require_token(request: Request) -> None:
    """Dependency of mutating endpoints. Raises HTTPException 403 when no token is
    configured (mutations disabled) and 401 when the client's token is missing or wrong."""
    if not get_settings(request).api_token:
        raise HTTPException(403, "mutations are disabled: start the dashboard with XFERLAB_API_TOKEN set")
    if not token_ok(request):
        raise HTTPException(401, "a valid token is required: send 'Authorization: Bearer TOKEN' or log in at /login")


def require_read(request: Request) -> None:
    """Dependency of read endpoints: open unless XFERLAB_DASHBOARD_PRIVATE is true,
    then the same check as :func:`require_token` (401 / 403)."""
    if get_settings(request).private:
        require_token(request)


def render(request: Request, name: str, status_code: int = 200, **context) -> object:
    """Render template ``name`` with the common context (logged-in flag, token configured)."""
    s = get_settings(request)
    ctx = {"logged_in": token_ok(request), "token_configured": bool(s.api_token), **context}
    return templates.TemplateResponse(request, name, ctx, status_code=status_code)
