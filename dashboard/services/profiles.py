"""Server CPU profiles as the dashboard shows them: the profiled cells of a campaign, one
cell's flame graphs and syscall table, and the differential flame graphs of two compare
operands (runner.report.profile_pairs) or of a regression's two campaigns.

The SVGs come from inferno (runner.report.flamegraph); each is served as a document of its
own (dashboard.pages.profiles) because it carries inferno's inline script.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from sqlalchemy.orm import Session

from dashboard.deps import PageError
from runner.report.data import CellProfileData
from runner.report.flamegraph import InfernoMissing, diff_svg, flamegraph_svg, folded_total
from runner.report.profiles import profiler_text


def campaign_profiles(session: Session, *, campaign_id: int) -> list[dict[str, Any]]:
    """The profiled cells of a campaign, in ``seq`` order: ``[{"cell_id", "server", "title",
    "repeat" (0-based), "status", "profiler" ("perf 6.1.187"), "rate_hz", "on_cpu_s",
    "off_cpu_s"}]``."""
    from runner.catalogue.workloads import WORKLOADS, WorkloadParams
    from runner.store.profiles import campaign_profiles as rows

    out = []
    for cell, p in rows(session, campaign_id=campaign_id):
        title = WORKLOADS[cell.workload].title_for(WorkloadParams.model_validate(cell.params))
        out.append({"cell_id": cell.id, "server": cell.server_label, "title": title, "repeat": cell.repeat,
                    "status": cell.status, "profiler": f"{p.profiler} {p.profiler_version}", "rate_hz": p.rate_hz,
                    "on_cpu_s": p.on_cpu_s, "off_cpu_s": p.off_cpu_s})
    return out


def cell_profile(session: Session, *, cell_id: int) -> CellProfileData:
    """The stored profile of cell ``cell_id``. Raises LookupError (404) naming the cell."""
    from runner.report.reader import load_cell_profile

    return load_cell_profile(session, cell_id=cell_id)


def graph_height(folded: str) -> int:
    """The pixel height of inferno's drawing of ``folded`` (16 px per level of the deepest
    stack, the root frame included, plus the title, subtitle and details lines), for sizing
    the frame that embeds it."""
    depth = max((line.rpartition(" ")[0].count(";") + 1 for line in folded.splitlines() if line.strip()),
                default=0)
    return (depth + 1) * 16 + 110


def profile_summary(p: CellProfileData) -> dict[str, Any]:
    """The figures shown beside a cell's flame graph: ``{"profiler", "rate_hz", "duration_s", "height"
    (of the on-CPU graph, pixels: :func:`graph_height`),
    "samples", "on_cpu_s", "off_cpu_s", "on_share" (on-CPU share of on + off, None when
    off-CPU was not measured), "has_off_cpu", "syscalls", "notes"}``."""
    on, off = p.on_cpu_s, p.off_cpu_s
    share = on / (on + off) if off is not None and on + off > 0 else None
    return {"profiler": profiler_text(p), "rate_hz": p.rate_hz, "duration_s": p.duration_s,
            "height": graph_height(p.on_cpu),
            "samples": folded_total(p.on_cpu), "on_cpu_s": on, "off_cpu_s": off, "on_share": share,
            "has_off_cpu": bool(p.off_cpu and folded_total(p.off_cpu) > 0), "syscalls": list(p.syscalls),
            "notes": list(p.notes)}


def _inferno(call, *args, **kwargs) -> str:
    try:
        return call(*args, **kwargs)
    except InfernoMissing as exc:
        raise PageError(503, str(exc)) from None


def cell_svg(session: Session, *, cell_id: int, kind: str = "on", width: int = 1200) -> str:
    """The flame graph SVG of cell ``cell_id``: on-CPU (``kind="on"``) or off-CPU (``"off"``),
    ``width`` pixels wide.
    Raises LookupError (no cell, not profiled, no off-CPU stacks), ValueError (no sample),
    PageError(503) when inferno is missing."""
    p = cell_profile(session, cell_id=cell_id)
    if kind == "off":
        if not p.off_cpu:
            raise LookupError(f"cell {cell_id} has no off-CPU stacks" + (f": {p.notes[0]}" if p.notes else ""))
        return _inferno(flamegraph_svg, p.off_cpu, title=f"{p.server} · {p.title}: off-CPU", count_name="us",
                        colors="io", subtitle=f"blocked {p.off_cpu_s or 0:.3f} s", width=width)
    sub = f"{profiler_text(p)} at {p.rate_hz} Hz over {p.duration_s:.2f} s; on-CPU {p.on_cpu_s:.3f} s"
    return _inferno(flamegraph_svg, p.on_cpu, title=f"{p.server} · {p.title}: on-CPU", subtitle=sub, width=width)


def compare_profiles(session: Session, *, a: str, b: str, campaign: int | None = None) -> list[dict[str, Any]]:
    """The workloads profiled on both sides of a comparison: ``[{"title", "workload",
    "params_key", "a_samples", "b_samples", "a_cells", "b_cells", "url", "height"}]``, ``url``
    the differential SVG's (:func:`diff_url`), ``height`` its pixels (:func:`graph_height`).
    Raises CompareError as runner.report.render."""
    from runner.report.profile_pairs import profile_pairs

    return [{"title": p.title, "workload": p.workload, "params_key": p.params_key, "a_samples": p.a_samples,
             "b_samples": p.b_samples, "a_cells": list(p.a_cells), "b_cells": list(p.b_cells),
             "url": diff_url(a, b, campaign=campaign, workload=p.workload, params_key=p.params_key),
             "height": graph_height(p.b_folded)}
            for p in profile_pairs(session, a, b, campaign=campaign)]


def diff_url(a: str, b: str, *, campaign: int | None, workload: str, params_key: str) -> str:
    """The dashboard address of the differential flame graph of ``a`` -> ``b`` for one workload."""
    q = {"a": a, "b": b, "workload": workload, "params_key": params_key}
    if campaign is not None:
        q["campaign"] = str(campaign)
    return "/compare/flamegraph.svg?" + urlencode(q)


def compare_svg(session: Session, *, a: str, b: str, campaign: int | None, workload: str, params_key: str,
                width: int = 1200) -> str:
    """The differential flame graph SVG of ``a`` -> ``b`` for ``workload`` and ``params_key``
    (runner.report.flamegraph.diff_svg; ``a``'s samples scaled to ``b``'s total). Raises
    LookupError when that workload was not profiled on both sides, CompareError for an
    operand that does not resolve, PageError(503) when inferno is missing. ``width`` in pixels."""
    from runner.report.profile_pairs import profile_pairs

    pairs = profile_pairs(session, a, b, campaign=campaign, workload=workload, params_key=params_key)
    if not pairs:
        raise LookupError(f"{workload} [{params_key}] was not profiled on both sides ({a} and {b})")
    p = pairs[0]
    sub = (f"red: share grew from {p.a} to {p.b}, blue: shrank; {p.a_samples} samples scaled to "
           f"{p.b_samples}")
    return _inferno(diff_svg, p.a_folded, p.b_folded, title=f"{p.title}: {p.a} -> {p.b}", subtitle=sub, width=width)


def regression_links(session: Session, changes: list[Any]) -> list[str | None]:
    """For each change of runner.history.find_regressions, the differential flame graph's
    address of its two campaigns (before -> after) when the series' server, workload and
    parameters were profiled in both, else None."""
    ids = {c.before.campaign_id for c in changes} | {c.after.campaign_id for c in changes}
    if not ids:
        return []
    from runner.store.profiles import profiled_groups

    have = profiled_groups(session, campaign_ids=ids)
    out: list[str | None] = []
    for c in changes:
        k = c.key
        before = (c.before.campaign_id, c.before.label, k.workload, k.params_key)
        after = (c.after.campaign_id, c.after.label, k.workload, k.params_key)
        out.append(diff_url(f"{c.before.campaign_id}:{c.before.label}", f"{c.after.campaign_id}:{c.after.label}",
                            campaign=None, workload=k.workload, params_key=k.params_key)
                   if before in have and after in have else None)
    return out
