"""``/api/compare``: the comparison of two operands (``ID``, ``ID:SERVER`` or ``SERVER``) and
its export, and ``/api/memory-timeline``, the memory over time that the compare page charts."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query

from dashboard.deps import CampaignQuery, OptionalCampaign, SessionDep
from dashboard.services.compare import comparison, memory_timelines, table_json
from dashboard.services.exports import FORMAT_PATTERN, download

router = APIRouter()


def operand():
    """The ``a`` / ``b`` query parameter: an operand as ``xferlab compare`` takes it."""
    return Query(..., min_length=1, max_length=300, description="ID, ID:SERVER or SERVER (as `xferlab compare`)")


@router.get("/api/compare", tags=["compare"])
def api_compare(session: SessionDep, a: str = operand(), b: str = operand(),
                campaign: OptionalCampaign = None) -> dict[str, Any]:
    """Comparison of ``a`` (reference) and ``b``: the table's rows (text as in the
    exports) and raw records (medians, CI, ratio, Mann-Whitney p, significance),
    the server CPU cost table (``cost``, null when not stored), the fairness table (``fairness``:
    Jain's index over the clients of N-client cells, null unless both have it), the memory
    table, and warnings (e.g. different environment classes). 404 when an operand does not resolve."""
    c = comparison(session, a=a, b=b, campaign=campaign)
    return {"a": c["a"], "b": c["b"], "warnings": c["warnings"], "comparison": table_json(c["table"]),
            "cost": table_json(c["cost"]), "fairness": table_json(c["fairness"]),
            "memory": table_json(c["memory"]), "chart_rows": c["rows"]}


@router.get("/api/memory-timeline", tags=["compare"])
def api_memory_timeline(campaign: CampaignQuery, session: SessionDep,
                        server: str = Query(..., min_length=1, max_length=300)) -> dict[str, Any]:
    """Memory over time of ``server`` in ``campaign``: one timeline per workload,
    points ``[t_s, uss_bytes, rss_minus_shared_bytes, nprocs]``. 404 for an unknown campaign."""
    return {"campaign": campaign, "server": server,
            "timelines": memory_timelines(session, campaign_id=campaign, server=server)}


@router.get("/api/compare/export", tags=["exports"])
def export_compare(session: SessionDep, a: str = Query(..., min_length=1, max_length=300),
                   b: str = Query(..., min_length=1, max_length=300), campaign: OptionalCampaign = None,
                   format: str = Query("rst", pattern=FORMAT_PATTERN), speedup: bool = False):
    """The comparison table of ``a`` (reference) and ``b`` as a download; operands as
    ``xferlab compare`` (``ID``, ``ID:SERVER`` or ``SERVER`` looked up in ``campaign``);
    the same bytes as ``xferlab compare A B --format F -o FILE``. 404 when an operand
    does not resolve."""
    from runner.report.render import compare_report

    body = compare_report(session, a, b, campaign=campaign, fmt=format, speedup=speedup)
    return download(body, format, f"xferlab-compare-{a}-vs-{b}")
