"""``api_router``: every JSON API route (campaigns, compare, history, regressions), each
behind the read check (:func:`dashboard.security.require_read`); routes that change
something need the token as well."""
from __future__ import annotations

from fastapi import APIRouter

from dashboard.api.routes import campaigns, compare, history, regressions
from dashboard.security import ReadRequired

api_router = APIRouter(dependencies=[ReadRequired])
for _module in (campaigns, compare, history, regressions):
    api_router.include_router(_module.router)
