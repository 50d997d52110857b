"""The compare page: a form of two operands and, once both are given, their comparison
table, charts and memory timelines."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from dashboard.deps import OptionalCampaign, SessionDep
from dashboard.services.compare import comparison, recent_operands
from dashboard.templating import render

router = APIRouter()


@router.get("/compare")
def page_compare(request: Request, session: SessionDep, a: str | None = Query(None, max_length=300),
                 b: str | None = Query(None, max_length=300), campaign: OptionalCampaign = None):
    ctx: dict[str, Any] = {"a": a or "", "b": b or "", "campaign": campaign, "operands": recent_operands(session),
                           "result": None, "error": None}
    if a and b:
        from runner.report.render import CompareError

        try:
            ctx["result"] = comparison(session, a=a, b=b, campaign=campaign)
            from dashboard.services.profiles import compare_profiles

            ctx["result"]["profiles"] = compare_profiles(session, a=a, b=b, campaign=campaign)
        except (CompareError, ValueError) as exc:
            ctx["error"] = str(exc).strip("'\"")
            return render(request, "compare.html", status_code=404 if isinstance(exc, LookupError) else 400, **ctx)
    return render(request, "compare.html", **ctx)
