"""Fairness: the per-client distribution of a campaign's N-client cells.

Every figure is derived from the per-client list each cell stores as the ``raw`` of its
``fairness``/``jain`` sample (runner.metrics.fairness.figures_from_raw), so cells stored before
the fairness figures were get the same figures and curves as new ones.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from dashboard.services.campaigns import workload_title
from runner.catalogue.workloads import WORKLOADS
from runner.metrics.fairness import stored_curve
from runner.store import queries

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
    queries.get_campaign(session, campaign_id=campaign_id)
    rows = queries.fairness_raws(session, campaign_id=campaign_id, server=server, workload=workload,
                                 params_key=params_key)
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for seq, repeat, label, wl, pkey, params, raw in rows:
        info = WORKLOADS.get(wl)
        got = stored_curve(raw, http=info is not None and info.protocol == "http")
        if got is None:
            continue
        figs, curve = got
        g = groups.setdefault((label, wl, pkey), {"server": label, "workload": wl, "params_key": pkey,
                                                  "title": workload_title(wl, params or {}),
                                                  "rate_unit": figs.rate_unit, "repeats": []})
        g["repeats"].append({"seq": seq, "repeat": repeat, "clients": figs.clients, "figures": figs.as_dict(),
                             "curve": _thin(curve)})
    return list(groups.values())
