"""Login and logout: the login page stores the API token in an HTTP-only cookie; logout
deletes it. Both refuse a browser's cross-site POST."""
from __future__ import annotations

import hmac

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import RedirectResponse

from dashboard.deps import SettingsDep
from dashboard.security import TOKEN_COOKIE, check_csrf, same_origin, token_ok
from dashboard.templating import render

router = APIRouter()


@router.get("/login")
def page_login(request: Request, next: str = "/"):
    return render(request, "login.html", next=next if next.startswith("/") else "/", error=None)


async def _login_origin(request: Request) -> None:
    """Login CSRF: a browser's cross-site POST of the login form is refused (403)."""
    if not same_origin(request):
        raise HTTPException(403, "cross-site request refused: the Origin of this form is not the dashboard's")


@router.post("/login", dependencies=[Depends(_login_origin)])
def page_login_post(request: Request, settings: SettingsDep, token: str = Form(..., max_length=500),
                    next: str = Form("/")):
    configured = settings.api_token
    target = next if next.startswith("/") and not next.startswith("//") else "/"
    if not configured:
        return render(request, "login.html", status_code=403, next=target,
                      error="no token is configured: start the dashboard with XFERLAB_API_TOKEN set")
    if not hmac.compare_digest(token.encode(), configured.encode()):
        return render(request, "login.html", status_code=401, next=target, error="wrong token")
    resp = RedirectResponse(target, status_code=303)
    resp.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", max_age=30 * 24 * 3600)
    return resp


async def _logout_csrf(request: Request) -> None:
    if token_ok(request):
        await check_csrf(request)


@router.post("/logout", dependencies=[Depends(_logout_csrf)])
def page_logout():
    resp = RedirectResponse("/", status_code=303)
    resp.delete_cookie(TOKEN_COOKIE)
    return resp

