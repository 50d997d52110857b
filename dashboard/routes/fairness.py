"""Fairness: the per-client distribution of a campaign's N-client cells.

Every figure is derived from the per-client list each cell stores as the ``raw`` of its
``fairness``/``jain`` sample (runner.metrics.fairness.figures_from_raw), so cells stored before
the fairness figures were get the same figures and curves as new ones.
"""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from sqlalchemy import select
from sqlalchemy.orm import Session

from dashboard.deps import CampaignId, get_session, require_read
from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.metrics.fairness import figures_from_raw, sorted_curve
from runner.store.models import Campaign, Cell, Sample

router = APIRouter()

#: Most points of one curve in a response: a cell of more clients is thinned to evenly
#: spaced ranks (the first and the last kept); its figures use every client.
MAX_CURVE_POINTS = 1000


def _thin(curve: list[float], limit: int = MAX_CURVE_POINTS) -> list[list[float]]:
    """``[[rank, rate], ...]`` (rank 1 = the fastest client), at most ``limit`` points."""
    n = len(curve)
    if n <= limit:
        ranks = list(range(n))
    else:
        ranks = sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})
    return [[i + 1, curve[i]] for i in ranks]


def _title(workload: str, params: dict) -> str:
    info = WORKLOADS.get(workload)
    if info is None:
        return workload
    try:
        return info.title_for(WorkloadParams.model_validate(params))
    except ValueError:
        return info.title


def campaign_fairness(session: Session, *, campaign_id: int, server: str | None = None,
                      workload: str | None = None, params_key: str | None = None) -> list[dict[str, Any]]:
    """The per-client distributions of a campaign's ``done`` N-client cells, grouped by
    (server, workload, parameters) in cell order, optionally only those of ``server``,
    ``workload`` and ``params_key``.

    Returns ``[{"server", "workload", "params_key", "title", "rate_unit" ("MiB/s" FTP,
    "req/s" HTTP), "repeats": [{"seq", "repeat", "clients", "figures": {jain, cv,
    min_rate, p50_rate, p95_rate, max_rate, min_time, p50_time, p95_time, max_time,
    clients, rate_unit}, "curve": [[rank, rate], ...]}]}]``: ``curve`` is the per-client
    rates sorted from the fastest client (rank 1) to the slowest, thinned to at most
    :data:`MAX_CURVE_POINTS` points. A cell whose stored list is malformed is left out.
    Raises LookupError for an unknown campaign."""
    if session.get(Campaign, campaign_id) is None:
        raise LookupError(f"no campaign {campaign_id}")
    q = (select(Cell.seq, Cell.repeat, Cell.server_label, Cell.workload, Cell.params_key, Cell.params, Sample.raw)
         .join(Sample, Sample.cell_id == Cell.id)
         .where(Cell.campaign_id == campaign_id, Cell.status == "done", Sample.metric == "fairness",
                Sample.stat == "jain", Sample.raw.is_not(None)))
    if server is not None:
        q = q.where(Cell.server_label == server)
    if workload is not None:
        q = q.where(Cell.workload == workload)
    if params_key is not None:
        q = q.where(Cell.params_key == params_key)
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for seq, repeat, label, wl, pkey, params, raw in session.execute(q.order_by(Cell.seq)):
        info = WORKLOADS.get(wl)
        http = info is not None and info.protocol == "http"
        if not isinstance(raw, list):
            continue
        try:
            figs = figures_from_raw(raw, http=http)
            curve = sorted_curve(raw, http=http)
        except (TypeError, ValueError):
            continue
        if figs is None:
            continue
        g = groups.setdefault((label, wl, pkey), {"server": label, "workload": wl, "params_key": pkey,
                                                  "title": _title(wl, params or {}), "rate_unit": figs.rate_unit,
                                                  "repeats": []})
        g["repeats"].append({"seq": seq, "repeat": repeat, "clients": figs.clients, "figures": figs.as_dict(),
                             "curve": _thin(curve)})
    return list(groups.values())


@router.get("/api/campaigns/{campaign_id}/fairness", tags=["campaigns"], dependencies=[Depends(require_read)])
def api_fairness(campaign_id: CampaignId,
                 server: str | None = Query(None, min_length=1, max_length=300, description="a server label"),
                 workload: str | None = Query(None, min_length=1, max_length=40, description="a workload name"),
                 params_key: str | None = Query(None, max_length=400, description="the cells' parameter key"),
                 session: Session = Depends(get_session)) -> dict[str, Any]:
    """The per-client distribution of every ``done`` N-client cell of a campaign, grouped by
    server, workload and parameters, one entry per repeat: the fairness figures (Jain's
    index, population CV, min/p50/p95/max per-client rate and time; docs/methodology.md,
    "Fairness") and the curve of per-client rates sorted from the fastest client (rank 1)
    to the slowest (MiB/s for FTP, req/s for HTTP). ``server``, ``workload`` and
    ``params_key`` narrow it to one group. 404 for an unknown campaign; an empty
    ``groups`` list when it has no N-client cell (yet)."""
    return {"campaign": campaign_id,
            "groups": campaign_fairness(session, campaign_id=campaign_id, server=server, workload=workload,
                                        params_key=params_key)}
