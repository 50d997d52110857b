"""``pages_router``: every HTML page. The pages that show data are behind the read check
(:func:`dashboard.security.require_read`); the login and logout pages are not."""
from __future__ import annotations

from fastapi import APIRouter

from dashboard.pages import auth, bisect, campaigns, compare, history, launch, profiles, regressions
from dashboard.security import ReadRequired

pages_router = APIRouter(include_in_schema=False)
_read = APIRouter(dependencies=[ReadRequired])
for _module in (campaigns, launch, bisect, compare, history, regressions, profiles):
    _read.include_router(_module.router)
pages_router.include_router(_read)
pages_router.include_router(auth.router)
