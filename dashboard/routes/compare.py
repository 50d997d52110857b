"""Compare: two servers or versions of a campaign, or two campaigns with comparable cells.

Comparable cells share workload and parameters (``params_key``); when the two
campaigns' environment classes differ the page and the API carry a warning. The
table is seed 000's comparison table (:func:`runner.report.tables.comparison_table`),
the memory table seed 000's layout (:func:`runner.report.tables.memory_table`).
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from dashboard.deps import CampaignQuery, OptionalCampaign, get_session, render, require_read
from runner.store.models import Campaign, Cell, Sample

router = APIRouter()

def _operand():
    return Query(..., min_length=1, max_length=300, description="ID, ID:SERVER or SERVER (as `xferlab compare`)")


def comparison(session: Session, *, a: str, b: str, campaign: int | None = None) -> dict[str, Any]:
    """The comparison of operands ``a`` (reference) and ``b``.

    Returns ``{"a", "b": server labels, "warnings": [str], "table": Table, "cost": Table | None
    (server CPU per unit of work, when both servers have it), "fairness": Table | None (Jain's
    index over the clients of N-client cells, when both have it), "memory": Table | None,
    "rows": [chart rows], "a_ref", "b_ref": (campaign id, label)}``;
    chart rows are ``{title, unit, a, b: medians, a_lo, a_hi, b_lo, b_hi: CI bounds, ratio, significant}``.
    Raises runner.report.render.CompareError (a LookupError) when an operand does not resolve."""
    from runner.report.render import comparison_data, resolve_operand
    from runner.report.tables import COST_METRICS, MEMORY_METRICS, comparison_table, fairness_comparison, memory_table

    data, la, lb, warnings = comparison_data(session, a, b, campaign=campaign)
    table = comparison_table(data, la, lb, ci=True)
    cost = None
    if all(any(s.server == x and s.metric in COST_METRICS for s in data.series) for x in (la, lb)):
        cost = comparison_table(data, la, lb, ci=True, metric=COST_METRICS,
                                title=f"Server CPU per unit of work: {la} vs. {lb}")
    fairness = fairness_comparison(data, la, lb)
    memory = None
    metrics = {s.metric for s in data.series}
    for m in MEMORY_METRICS:
        if m in metrics:
            memory = memory_table(data, [la, lb], metric=m)
            break
    rows = []
    for row, rec in zip(table.rows, table.records):
        if row.comparison is None:
            continue
        c = row.comparison
        rows.append({"title": rec["title"], "unit": rec["unit"], "a": c.a.median, "b": c.b.median,
                     "a_lo": c.a.ci_low, "a_hi": c.a.ci_high, "b_lo": c.b.ci_low, "b_hi": c.b.ci_high,
                     "ratio": row.cells[3].text, "significant": c.significant, "p_value": c.p_value})
    return {"a": la, "b": lb, "warnings": warnings, "table": table, "cost": cost, "fairness": fairness,
            "memory": memory, "rows": rows,
            "a_ref": resolve_operand(session, a, campaign=campaign),
            "b_ref": resolve_operand(session, b, campaign=campaign)}


def memory_timelines(session: Session, *, campaign_id: int, server: str, limit_points: int = 600
                     ) -> list[dict[str, Any]]:
    """Memory over time of one server of a campaign: for each workload, the timeline
    stored in the raw field of the peak ``server_mem_uss`` sample of its first done
    cell (``[[t_s, uss, rss_minus_shared, nprocs], ...]``, bytes), thinned to at most
    ``limit_points`` points. Returns ``[{workload, repeat, points: [[t_s, uss, rss_minus_shared, nprocs]]}]``."""
    rows = session.execute(
        select(Cell.workload, Cell.repeat, Cell.params_key, Sample.raw)
        .join(Sample, Sample.cell_id == Cell.id)
        .where(Cell.campaign_id == campaign_id, Cell.server_label == server, Cell.status == "done",
               Sample.metric == "server_mem_uss", Sample.stat == "peak", Sample.raw.is_not(None))
        .order_by(Cell.seq)).all()
    seen: set[tuple[str, str]] = set()
    out = []
    for workload, repeat, pkey, raw in rows:
        if (workload, pkey) in seen or not isinstance(raw, list):
            continue
        seen.add((workload, pkey))
        step = max(1, len(raw) // limit_points)
        out.append({"workload": workload, "repeat": repeat, "points": raw[::step]})
    return out


def _operands(session: Session, limit: int = 30) -> list[str]:
    """``ID:SERVER`` operands of the latest campaigns (for the form's suggestions)."""
    ids = session.scalars(select(Campaign.id).order_by(Campaign.id.desc()).limit(limit)).all()
    if not ids:
        return []
    rows = session.execute(select(Cell.campaign_id, Cell.server_label).where(Cell.campaign_id.in_(ids))
                           .distinct().order_by(Cell.campaign_id.desc(), Cell.server_label)).all()
    return [f"{cid}:{label}" for cid, label in rows]


def _table_json(t) -> dict[str, Any] | None:
    if t is None:
        return None
    return {"title": t.title, "caption": t.caption, "columns": [c.header for c in t.columns],
            "rows": [[cell.text for cell in r.cells] for r in t.rows], "records": t.records}


@router.get("/api/compare", tags=["compare"], dependencies=[Depends(require_read)])
def api_compare(a: str = _operand(), b: str = _operand(), campaign: OptionalCampaign = None,
                session: Session = Depends(get_session)) -> dict[str, Any]:
    """Comparison of ``a`` (reference) and ``b``: the table's rows (text as in the
    exports) and raw records (medians, CI, ratio, Mann-Whitney p, significance),
    the server CPU cost table (``cost``, null when not stored), the fairness table (``fairness``:
    Jain's index over the clients of N-client cells, null unless both have it), the memory
    table, and warnings (e.g. different environment classes). 404 when an operand does not resolve."""
    c = comparison(session, a=a, b=b, campaign=campaign)
    return {"a": c["a"], "b": c["b"], "warnings": c["warnings"], "comparison": _table_json(c["table"]),
            "cost": _table_json(c["cost"]), "fairness": _table_json(c["fairness"]),
            "memory": _table_json(c["memory"]), "chart_rows": c["rows"]}


@router.get("/api/memory-timeline", tags=["compare"], dependencies=[Depends(require_read)])
def api_memory_timeline(campaign: CampaignQuery, server: str = Query(..., min_length=1, max_length=300),
                        session: Session = Depends(get_session)) -> dict[str, Any]:
    """Memory over time of ``server`` in ``campaign``: one timeline per workload,
    points ``[t_s, uss_bytes, rss_minus_shared_bytes, nprocs]``. 404 for an unknown campaign."""
    if session.get(Campaign, campaign) is None:
        raise LookupError(f"no campaign {campaign}")
    return {"campaign": campaign, "server": server,
            "timelines": memory_timelines(session, campaign_id=campaign, server=server)}


@router.get("/compare", include_in_schema=False, dependencies=[Depends(require_read)])
def page_compare(request: Request, a: str | None = Query(None, max_length=300),
                 b: str | None = Query(None, max_length=300), campaign: OptionalCampaign = None,
                 session: Session = Depends(get_session)):
    ctx: dict[str, Any] = {"a": a or "", "b": b or "", "campaign": campaign, "operands": _operands(session),
                           "result": None, "error": None}
    if a and b:
        from runner.report.render import CompareError

        try:
            ctx["result"] = comparison(session, a=a, b=b, campaign=campaign)
        except (CompareError, ValueError) as exc:
            ctx["error"] = str(exc).strip("'\"")
            return render(request, "compare.html", status_code=404 if isinstance(exc, LookupError) else 400, **ctx)
    return render(request, "compare.html", **ctx)
