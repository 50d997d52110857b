"""Saturation: the curves of a campaign's sustained-load sweeps: throughput and p99 against
the number of clients N, the knee, users at rate R. Every figure comes from
runner.report.saturation over the campaign's stored series (runner.report.reader.load_campaign),
the same figures ``xferlab show`` prints and the exports carry."""
from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from runner.report.reader import load_campaign
from runner.report.saturation import curves
from runner.store import queries


def campaign_saturation(session: Session, *, campaign_id: int) -> list[dict[str, Any]]:
    """The saturation curves of a campaign, one per (server, sustained workload, parameters
    without ``clients``) swept over at least two client counts, as
    runner.report.saturation.Saturation.as_dict: ``{"server", "workload", "title",
    "params_key", "unit" ("MiB/s" or "1/s"), "user_rate" (bytes/s or None), "points":
    [{"clients", "throughput", "p99_ms", "users_at_rate", "min_users_at_rate", "repeats"}],
    "knee", "knee_at_end", "all_at_rate"}``. Raises LookupError for an unknown campaign."""
    queries.get_campaign(session, campaign_id=campaign_id)
    return [c.as_dict() for c in curves(load_campaign(session, campaign_id=campaign_id))]
