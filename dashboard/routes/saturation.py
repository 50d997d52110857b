"""Saturation: the curves of a campaign's sustained-load sweeps: throughput and
p99 against the number of clients N, the knee, users at rate R. Every figure comes from
runner.report.saturation over the campaign's stored series (runner.report.reader.load_campaign),
the same figures ``xferlab show`` prints and the exports carry."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from sqlalchemy.orm import Session

from dashboard.deps import CampaignId, get_session, require_read
from runner.report.reader import load_campaign
from runner.report.saturation import KNEE_P99_FACTOR, KNEE_THROUGHPUT_SHARE, curves
from runner.store.models import Campaign

router = APIRouter()


def campaign_saturation(session: Session, *, campaign_id: int) -> list[dict[str, Any]]:
    """The saturation curves of a campaign, one per (server, sustained workload, parameters
    without ``clients``) swept over at least two client counts, as
    runner.report.saturation.Saturation.as_dict: ``{"server", "workload", "title",
    "params_key", "unit" ("MiB/s" or "1/s"), "user_rate" (bytes/s or None), "points":
    [{"clients", "throughput", "p99_ms", "users_at_rate", "min_users_at_rate", "repeats"}],
    "knee", "knee_at_end", "all_at_rate"}``. Raises LookupError for an unknown campaign."""
    if session.get(Campaign, campaign_id) is None:
        raise LookupError(f"no campaign {campaign_id}")
    return [c.as_dict() for c in curves(load_campaign(session, campaign_id=campaign_id))]


@router.get("/api/campaigns/{campaign_id}/saturation", tags=["campaigns"], dependencies=[Depends(require_read)])
def api_saturation(campaign_id: CampaignId, session: Session = Depends(get_session)) -> dict[str, Any]:
    """The saturation curve of every sustained-load sweep of a campaign (``retr_sustained``,
    ``stor_sustained`` at several client counts): per N the median throughput, p99 latency
    (ms, from each operation's intended start) and users at rate R over the repeats; the
    knee (the largest N within 5% of the best throughput whose p99 is below twice the p99
    at the smallest N; docs/methodology.md, "Saturation curve") and the largest N at which
    every client reached R. 404 for an unknown campaign; an empty ``curves`` list when it
    has no sweep (yet)."""
    return {"campaign": campaign_id, "knee_rule": {"throughput_share": KNEE_THROUGHPUT_SHARE,
                                                   "p99_factor": KNEE_P99_FACTOR},
            "curves": campaign_saturation(session, campaign_id=campaign_id)}
