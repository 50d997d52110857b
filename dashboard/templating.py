"""The Jinja2 templates of the HTML pages and :func:`render`, which gives every page the
login state and its CSRF token."""
from __future__ import annotations

from pathlib import Path

from fastapi import Request
from fastapi.templating import Jinja2Templates

from dashboard.deps import get_settings
from dashboard.security import csrf_token, token_ok
from runner.history.provenance import short_value

TEMPLATES_DIR = Path(__file__).parent / "templates"

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
#: ``{{ value|shortfact }}``: an environment fact's value as one short text (``-`` for none).
templates.env.filters["shortfact"] = short_value


def render(request: Request, name: str, status_code: int = 200, **context) -> object:
    """Render template ``name`` with the common context (logged-in flag, token configured,
    the CSRF token of a logged-in browser) and ``context``; returns the TemplateResponse."""
    s = get_settings(request)
    logged_in = token_ok(request)
    ctx = {"logged_in": logged_in, "token_configured": bool(s.api_token),
           "csrf_token": csrf_token(request) if logged_in else "", **context}
    return templates.TemplateResponse(request, name, ctx, status_code=status_code)
