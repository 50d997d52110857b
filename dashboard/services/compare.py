"""Compare: two servers or versions of a campaign, or two campaigns with comparable cells.

Comparable cells share workload and parameters (``params_key``); when the two
campaigns' environment classes differ the page and the API carry a warning. The
table is seed 000's comparison table (:func:`runner.report.tables.comparison_table`),
the memory table seed 000's layout (:func:`runner.report.tables.memory_table`).
"""
from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from runner.store import queries


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


def table_json(t) -> dict[str, Any] | None:
    """A runner.report Table as JSON: ``{"title", "caption", "columns": [header], "rows":
    [[cell text]], "records": [dict]}``; None for None."""
    if t is None:
        return None
    return {"title": t.title, "caption": t.caption, "columns": [c.header for c in t.columns],
            "rows": [[cell.text for cell in r.cells] for r in t.rows], "records": t.records}


def memory_timelines(session: Session, *, campaign_id: int, server: str, limit_points: int = 600
                     ) -> list[dict[str, Any]]:
    """Memory over time of one server of a campaign: for each workload, the timeline
    stored in the raw field of the peak ``server_mem_uss`` sample of its first done
    cell (``[[t_s, uss, rss_minus_shared, nprocs], ...]``, bytes), thinned to at most
    ``limit_points`` points. Returns ``[{workload, repeat, points: [[t_s, uss, rss_minus_shared, nprocs]]}]``.
    Raises LookupError for an unknown campaign."""
    queries.get_campaign(session, campaign_id=campaign_id)
    seen: set[tuple[str, str]] = set()
    out = []
    for workload, repeat, pkey, raw in queries.memory_raws(session, campaign_id=campaign_id, server=server):
        if (workload, pkey) in seen or not isinstance(raw, list):
            continue
        seen.add((workload, pkey))
        step = max(1, len(raw) // limit_points)
        out.append({"workload": workload, "repeat": repeat, "points": raw[::step]})
    return out


def recent_operands(session: Session, limit: int = 30) -> list[str]:
    """``ID:SERVER`` operands of the ``limit`` latest campaigns (the compare form's suggestions)."""
    return [f"{cid}:{label}" for cid, label in queries.recent_servers(session, campaigns=limit)]
