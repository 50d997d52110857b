"""The dashboard's FastAPI application factory.

Run it with ``xferlab dashboard`` (uvicorn, ``dashboard.app:create_app`` as a factory)
and ``xferlab worker`` alongside: the dashboard queues campaigns, the worker runs them.
OpenAPI documentation of the JSON API is at ``/docs`` and ``/redoc`` (``/openapi.json``),
behind the read check (the token is needed when the dashboard is private).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dashboard.deps import PageError
from dashboard.security import ReadRequired, token_ok
from dashboard.settings import DashboardSettings
from dashboard.templating import render

STATIC_DIR = Path(__file__).parent / "static"

log = logging.getLogger(__name__)


class BodyTooLarge(HTTPException):
    """Raised from the ASGI ``receive`` of a request whose body grew past the limit (413)."""


class BodyLimit:
    """ASGI middleware: cut off any request body at ``settings.max_body`` bytes.

    Counts the bytes the application reads; the read that passes the limit raises
    :class:`BodyTooLarge` (answered 413), so a body sent without ``Content-Length``
    (chunked) is never read beyond the limit plus one chunk. Declared lengths are checked
    earlier, before any read, by :func:`dashboard.security.require_token`."""

    def __init__(self, app: ASGIApp, settings: DashboardSettings):
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.settings.max_body
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(413, f"request body larger than the limit of {limit} bytes "
                                            "(XFERLAB_DASHBOARD_MAX_BODY)")
            return message

        await self.app(scope, limited, send)


def _is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _error(request: Request, status: int, message: str, extra: dict | None = None):
    if _is_api(request) or "text/html" not in request.headers.get("accept", "text/html"):
        return JSONResponse({"detail": message, **(extra or {})}, status_code=status)
    if status == 401:
        return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
    return render(request, "error.html", status_code=status, status=status, message=message)


def _validation_message(exc: RequestValidationError) -> tuple[str, list[dict]]:
    errors = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("query", "body", "path"))
        errors.append({"field": loc, "message": e.get("msg", "invalid")})
    text = "; ".join(f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors)
    return text or "invalid request", errors


def create_app(settings: DashboardSettings | None = None, engine: Engine | None = None) -> FastAPI:
    """Build the dashboard app.

    Args:
        settings: DashboardSettings (default: read from the environment).
        engine: SQLAlchemy engine of a migrated xferlab database (default: the
            runner's ``get_engine()`` on first request: XFERLAB_DATABASE_URL or the
            embedded PostgreSQL).

    Errors: unknown ids and operands answer 404, bad parameters 400/422, a missing
    or wrong token 401 (403 when no token is configured), an unreachable database
    503; always with a one-line ``detail`` message (JSON under /api/, a page otherwise).
    """
    from dashboard.api.main import api_router
    from dashboard.pages.main import pages_router

    app = FastAPI(title="xferlab dashboard", version="1",
                  description="Launch FTP server benchmark campaigns, watch them, compare, find regressions, "
                              "export tables. Mutating endpoints need the XFERLAB_API_TOKEN as a Bearer token.",
                  docs_url=None, redoc_url=None, openapi_url=None)
    app.state.settings = settings or DashboardSettings()
    app.state.engine = engine
    app.add_middleware(BodyLimit, settings=app.state.settings)

    @app.exception_handler(PageError)
    async def _page_error(request: Request, exc: PageError):
        return _error(request, exc.status, exc.message)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException):
        return _error(request, exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError):
        text, errors = _validation_message(exc)
        return _error(request, 422, text, {"errors": errors})

    @app.exception_handler(LookupError)
    async def _lookup_error(request: Request, exc: LookupError):
        return _error(request, 404, str(exc).strip("'\""))

    @app.exception_handler(ValueError)
    async def _value_error(request: Request, exc: ValueError):
        return _error(request, 400, str(exc))

    from runner.store.db import DatabaseError

    @app.exception_handler(DatabaseError)
    async def _db_error(request: Request, exc: DatabaseError):
        # the reason names paths and the server's address: only for token holders
        log.error("database unavailable: %s", exc)
        if token_ok(request):
            return _error(request, 503, f"database unavailable: {exc}")
        return _error(request, 503, "database unavailable (the reason is in the dashboard's log)")

    from sqlalchemy.exc import DataError

    @app.exception_handler(DataError)
    async def _data_error(request: Request, exc: DataError):
        # PostgreSQL refused a value (a number out of its column's range, a NUL byte in text):
        # bad input that the parameter checks did not catch, not a server fault
        reason = str(getattr(exc, "orig", exc)).splitlines()[0][:200]
        log.warning("%s %s: value refused by the database: %s", request.method, request.url.path, reason)
        return _error(request, 422, f"a value the database cannot store or compare: {reason}")

    # the API documentation, behind the read check (private dashboards need the token)
    @app.get("/openapi.json", include_in_schema=False, dependencies=[ReadRequired])
    def openapi_json():
        return JSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False, dependencies=[ReadRequired])
    def swagger_docs():
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - API")

    @app.get("/redoc", include_in_schema=False, dependencies=[ReadRequired])
    def redoc_docs():
        return get_redoc_html(openapi_url="/openapi.json", title=f"{app.title} - API")

    @app.middleware("http")
    async def _server_timing(request: Request, call_next):
        t0 = time.perf_counter()
        response = await call_next(request)
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - t0) * 1000:.1f}"
        return response

    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")

    @app.get("/static/vendor/chart.min.js", include_in_schema=False)
    def chartjs(request: Request):
        path = request.app.state.settings.chartjs_path
        if not path.is_file():  # the path itself only for token holders: no file details on open pages
            where = f" at {path}" if token_ok(request) else ""
            return PlainTextResponse(f"/* Chart.js not found{where}: install Debian's libjs-chart.js or set "
                                     "XFERLAB_CHARTJS_PATH (see docs/dashboard.md) */\n", status_code=404,
                                     media_type="application/javascript")
        return FileResponse(path, media_type="application/javascript")

    # the vendor route must win over the static mount: move it before the mount
    app.router.routes.insert(0, app.router.routes.pop())

    app.include_router(api_router)
    app.include_router(pages_router)
    return app
