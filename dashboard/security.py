"""Who may do what: the API token (header or login cookie), the CSRF check of
cookie-authenticated forms, the read and mutation checks that routes depend on, and the
redaction of error messages for viewers without the token."""
from __future__ import annotations

import hashlib
import hmac

from fastapi import Depends, HTTPException, Request

from dashboard.deps import get_settings

TOKEN_COOKIE = "xferlab_token"

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def given_token(request: Request) -> str | None:
    """The token the client sent: ``Authorization: Bearer T``, ``X-Xferlab-Token: T``, or the login cookie."""
    return _header_token(request) or request.cookies.get(TOKEN_COOKIE)


def _header_token(request: Request) -> str | None:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.headers.get("x-xferlab-token")


def token_ok(request: Request) -> bool:
    """True when a token is configured and the client sent it (constant-time compare)."""
    token = get_settings(request).api_token
    given = given_token(request)
    if not token or given is None:
        return False
    return hmac.compare_digest(given.encode(), token.encode())


def csrf_token(request: Request) -> str:
    """The CSRF token that the forms of a logged-in browser carry (hidden field ``csrf_token``)
    and that cookie-authenticated requests may send as ``X-CSRF-Token``.

    It is HMAC-SHA256 (RFC 2104) keyed with the configured API token over the login
    cookie's value, hex-encoded (OWASP CSRF cheat sheet, "signed double-submit cookie").
    The login cookie holds the API token itself, so this is one fixed value per
    deployment: it does not rotate and is the same in every browser. It protects because
    it is only rendered into pages for a logged-in browser and a cross-site page cannot
    read those pages (same-origin policy); the Origin / Sec-Fetch-Site check
    (:func:`same_origin`) is a second guard. ``""`` when no token is configured or the
    client sent no login cookie."""
    key = get_settings(request).api_token
    cookie = request.cookies.get(TOKEN_COOKIE)
    if not key or not cookie:
        return ""
    return hmac.new(key.encode(), b"xferlab-csrf-v1:" + cookie.encode(), hashlib.sha256).hexdigest()


def check_content_length(request: Request) -> None:
    """Refuse a request whose declared body is larger than ``settings.max_body`` before any of
    it is read. Raises HTTPException 413 (too large) or 400 (``Content-Length`` not a number).
    A body sent without ``Content-Length`` is cut off by :class:`dashboard.app.BodyLimit`."""
    declared = request.headers.get("content-length")
    if declared is None:
        return
    if not declared.strip().isdigit():
        raise HTTPException(400, f"Content-Length is not a number: {declared[:40]!r}")
    limit = get_settings(request).max_body
    if int(declared) > limit:
        raise HTTPException(413, f"request body of {int(declared)} bytes is larger than the limit of {limit} bytes "
                                 "(XFERLAB_DASHBOARD_MAX_BODY)")


def same_origin(request: Request) -> bool:
    """False when the browser says the request comes from another origin (scheme, host, port):
    an ``Origin`` header that differs from the request's own, or ``Sec-Fetch-Site`` other than
    ``same-origin``/``none``. True when the client sent neither (curl, scripts)."""
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    return origin in (f"{request.url.scheme}://{host}", f"http://{host}", f"https://{host}")


async def check_csrf(request: Request) -> None:
    """The CSRF check of an unsafe request authenticated by the login cookie (requests that
    carry the token in a header cannot be forged by another site and skip it).

    First, before the body is read: a browser's ``Origin`` / ``Sec-Fetch-Site`` naming
    another origin (another port of the same host included) is refused. Then the CSRF token
    (:func:`csrf_token`) must come as the ``X-CSRF-Token`` header or, for a form, as its
    ``csrf_token`` field (the form body is parsed here, after the size check, within
    ``settings.max_body``). Raises HTTPException 403 naming what is missing."""
    if request.method in SAFE_METHODS or _header_token(request) or not request.cookies.get(TOKEN_COOKIE):
        return
    if not same_origin(request):
        raise HTTPException(403, "cross-site request refused: the Origin of this form is not the dashboard's")
    expected = csrf_token(request)
    sent = request.headers.get(CSRF_HEADER)
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if sent is None and ctype in FORM_TYPES:
        form = await request.form(max_files=1, max_fields=200)
        value = form.get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    if not sent:
        raise HTTPException(403, "CSRF token missing: reload the page and submit the form again "
                                 "(API clients send the token as 'Authorization: Bearer TOKEN')")
    if not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise HTTPException(403, "CSRF token does not match the login cookie: reload the page and submit again")


async def require_token(request: Request) -> None:
    """Dependency of mutating endpoints, run before the body is read. Raises HTTPException
    403 when no token is configured (mutations disabled), 401 when the client's token is
    missing or wrong, 413 when ``Content-Length`` exceeds ``settings.max_body``, and 403
    when a cookie-authenticated request fails the CSRF check (:func:`check_csrf`)."""
    _token_check(request)
    check_content_length(request)
    await check_csrf(request)


def _token_check(request: Request) -> None:
    if not get_settings(request).api_token:
        raise HTTPException(403, "mutations are disabled: start the dashboard with XFERLAB_API_TOKEN set")
    if not token_ok(request):
        raise HTTPException(401, "a valid token is required: send 'Authorization: Bearer TOKEN' or log in at /login")


def require_read(request: Request) -> None:
    """Dependency of read endpoints: open unless XFERLAB_DASHBOARD_PRIVATE is true,
    then the token check of :func:`require_token` (401 / 403)."""
    if get_settings(request).private:
        _token_check(request)


REDACTED_INVENTORY = "the hosts inventory could not be used (log in to see why)"


def public_error(request: Request, message: str | None) -> str | None:
    """``message`` as a viewer may see it: unchanged for token holders; for anyone else a
    message about the hosts inventory (``hosts.inventory``, ``ansible-inventory``: they name
    files and whether they exist or can be read) becomes :data:`REDACTED_INVENTORY`."""
    if message is None or token_ok(request) or "inventory" not in message.lower():
        return message
    return REDACTED_INVENTORY


TokenRequired = Depends(require_token)
"""``dependencies=[TokenRequired]``: the route mutates and needs the token (:func:`require_token`)."""

ReadRequired = Depends(require_read)
"""``dependencies=[ReadRequired]``: the route reads (:func:`require_read`; open unless private)."""
