"""``/api/campaigns``: the list, launching one, one campaign's progress, cancelling it, and
its export, per-client fairness, saturation curves and capacity searches."""
from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from dashboard.deps import INT4_MAX, CampaignId, SessionDep
from dashboard.security import TokenRequired, public_error
from dashboard.services.campaigns import CampaignDetail, CampaignInfo, campaign_detail, list_campaigns, redact
from dashboard.services.capacity import campaign_capacity
from dashboard.services.exports import FORMAT_PATTERN, download
from dashboard.services.fairness import campaign_fairness
from dashboard.services.launch import launch_in_thread
from dashboard.services.saturation import campaign_saturation
from runner.report.saturation import KNEE_P99_FACTOR, KNEE_THROUGHPUT_SHARE
from runner.spec.model import CampaignSpec, SpecError

router = APIRouter(prefix="/api/campaigns")

# Content types the launch route parses (anything else is 415: a cross-site "simple" request can
# only send text/plain, multipart/form-data, application/x-www-form-urlencoded or none)
JSON_TYPES = ("application/json",)
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")


@router.get("", response_model=list[CampaignInfo], tags=["campaigns"])
def api_campaigns(request: Request, session: SessionDep, limit: int = Query(100, ge=1, le=1000),
                  offset: int = Query(0, ge=0, le=INT4_MAX)):
    """Campaigns, newest first, with progress counters and the estimated time left."""
    return [redact(request, c) for c in list_campaigns(session, limit=limit, offset=offset)]


@router.post("", status_code=201, tags=["campaigns"], dependencies=[TokenRequired],
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/json": {
                     "schema": CampaignSpec.model_json_schema(ref_template="#/components/schemas/{model}")},
                 "application/yaml": {"schema": {"type": "string"}}}}})
async def api_launch(request: Request, session: SessionDep):
    """Queue a campaign. Body: the spec as JSON (``application/json``) or YAML
    (``application/yaml``, ``application/x-yaml``, ``text/yaml``), the same spec as
    ``xferlab run SPEC``. Returns 201 ``{"id", "url", "cells_total"}``; 415 for any other
    ``Content-Type`` (``text/plain`` included: cross-site forms can send it); 413 for a body
    over the limit; 422 ``{"detail", "errors": [{"field", "message"}]}`` for an invalid spec
    (the cell bound included). Needs the token."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype not in JSON_TYPES + YAML_TYPES:
        raise HTTPException(415, f"Content-Type {ctype or '(none)'!r} is not accepted: send the spec as "
                                 "application/json or application/yaml")
    body = await request.body()
    try:
        if ctype in YAML_TYPES:
            cid, cells = await launch_in_thread(session, text=body.decode("utf-8", errors="replace"))
        else:
            cid, cells = await launch_in_thread(session, data=_json_spec(body))
    except SpecError as exc:
        return JSONResponse({"detail": str(exc), "errors": [{"field": p, "message": m} for p, m in exc.errors]},
                            status_code=422)
    return {"id": cid, "url": f"/campaigns/{cid}", "cells_total": cells}


def _json_spec(body: bytes) -> Any:
    """The decoded JSON of a launch body (``null`` when empty). Raises SpecError when it is
    not JSON or is nested past the decoder's recursion limit."""
    try:
        return json.loads(body or b"null")
    except ValueError as exc:
        raise SpecError([("", f"not valid JSON: {exc}")], "body") from None
    except RecursionError:  # e.g. 100,000 nested "[": under the body limit, past json's recursion
        raise SpecError([("", "not valid JSON: nested too deeply")], "body") from None


@router.get("/{campaign_id}", response_model=CampaignDetail, tags=["campaigns"])
def api_campaign(request: Request, campaign_id: CampaignId, session: SessionDep):
    """One campaign: progress, running cell, failures with their reason, latest figures, ETA (s). 404 if unknown.
    Without the token, reasons about the hosts inventory are replaced by a generic line."""
    return redact(request, campaign_detail(session, campaign_id=campaign_id))


@router.post("/{campaign_id}/cancel", response_model=CampaignInfo, tags=["campaigns"],
             dependencies=[TokenRequired])
def api_cancel(campaign_id: CampaignId, session: SessionDep):
    """Cancel a queued or running campaign (queued cells are cancelled; a running cell
    finishes). 404 for an unknown id, 409 when it already finished. Needs the token."""
    from runner.store import campaigns as crud

    try:
        crud.cancel_campaign(session, campaign_id=campaign_id)
    except ValueError as exc:
        raise HTTPException(409, str(exc)) from None
    return campaign_detail(session, campaign_id=campaign_id)


@router.get("/{campaign_id}/export", tags=["exports"])
def export_campaign(request: Request, campaign_id: CampaignId, session: SessionDep,
                    format: str = Query("rst", pattern=FORMAT_PATTERN), speedup: bool = False):
    """A campaign's report (campaign table, comparisons against the first server,
    memory table) as a download; the same bytes as ``xferlab export ID --format F -o FILE``
    (without the token, failure reasons about the hosts inventory are replaced by a generic
    line). 404 for an unknown campaign, 422 for an unknown format."""
    from runner.report.reader import load_campaign
    from runner.report.render import campaign_report

    data = load_campaign(session, campaign_id=campaign_id)
    data.failures = [(*f[:3], public_error(request, f[3]) or "") for f in data.failures]
    return download(campaign_report(data, fmt=format, speedup=speedup), format, f"xferlab-campaign-{campaign_id}")


@router.get("/{campaign_id}/fairness", tags=["campaigns"])
def api_fairness(campaign_id: CampaignId, session: SessionDep,
                 server: str | None = Query(None, min_length=1, max_length=300, description="a server label"),
                 workload: str | None = Query(None, min_length=1, max_length=40, description="a workload name"),
                 params_key: str | None = Query(None, max_length=400, description="the cells' parameter key")
                 ) -> dict[str, Any]:
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


@router.get("/{campaign_id}/saturation", tags=["campaigns"])
def api_saturation(campaign_id: CampaignId, session: SessionDep) -> dict[str, Any]:
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


@router.get("/{campaign_id}/capacity", tags=["campaigns"])
def api_capacity(campaign_id: CampaignId, session: SessionDep) -> dict[str, Any]:
    """The sustainable users of every ended capacity search of a campaign (docs/methodology.md,
    "Capacity"): the answer, its service level, the bracket ``[lo, hi - 1]``, why it broke,
    and per N the slowest user's rate (KiB/s) and the p99 latency (ms) of its slowest run.
    404 for an unknown campaign; an empty ``searches`` list when no search has ended (yet)."""
    return {"campaign": campaign_id, "searches": campaign_capacity(session, campaign_id=campaign_id)}
