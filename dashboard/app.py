"""The dashboard's FastAPI application factory.

Run it with ``xferlab dashboard`` (uvicorn, ``dashboard.app:create_app`` as a factory)
and ``xferlab worker`` alongside: the dashboard queues campaigns, the worker runs them.
OpenAPI documentation of the JSON API is at ``/docs`` (``/openapi.json``).
"""
from __future__ import annotations

import logging
import time

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine

from dashboard.deps import STATIC_DIR, PageError, render
from dashboard.settings import DashboardSettings

log = logging.getLogger(__name__)


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
    from dashboard.routes import campaigns, compare, exports, history, launch, regressions

    app = FastAPI(title="xferlab dashboard", version="1",
                  description="Launch FTP server benchmark campaigns, watch them, compare, find regressions, "
                              "export tables. Mutating endpoints need the XFERLAB_API_TOKEN as a Bearer token.")
    app.state.settings = settings or DashboardSettings()
    app.state.engine = engine

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
        return _error(request, 503, f"database unavailable: {exc}")

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
        if not path.is_file():
            return PlainTextResponse(f"/* Chart.js not found at {path}: install Debian's libjs-chart.js or set "
                                     "XFERLAB_CHARTJS_PATH (see docs/dashboard.md) */\n", status_code=404,
                                     media_type="application/javascript")
        return FileResponse(path, media_type="application/javascript")

    # the vendor route must win over the static mount: move it before the mount
    app.router.routes.insert(0, app.router.routes.pop())

    for module in (campaigns, launch, compare, history, regressions, exports):
        app.include_router(module.router)
    return app
