"""Exports: a campaign or a comparison as RST, HTML, Markdown, CSV, JSON or text.

The bytes are those of the CLI (``xferlab export ID --format F -o FILE`` and
``xferlab compare A B --format F -o FILE``): both call
:func:`runner.report.render.campaign_report` / :func:`runner.report.render.compare_report`.
"""
from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from dashboard.deps import CampaignId, OptionalCampaign, get_session, public_error, require_read
from runner.report.render import FORMATS

router = APIRouter(tags=["exports"])

MEDIA_TYPES = {"text": "text/plain", "rst": "text/x-rst", "html": "text/html", "md": "text/markdown",
               "csv": "text/csv", "json": "application/json"}
SUFFIX = {"text": "txt", "rst": "rst", "html": "html", "md": "md", "csv": "csv", "json": "json"}
FORMAT_PATTERN = "^(" + "|".join(FORMATS) + ")$"


def _download(body: str, fmt: str, stem: str) -> Response:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("_") or "export"
    return Response(body.encode(), media_type=f"{MEDIA_TYPES[fmt]}; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{stem}.{SUFFIX[fmt]}"'})


@router.get("/api/campaigns/{campaign_id}/export", dependencies=[Depends(require_read)])
def export_campaign(request: Request, campaign_id: CampaignId, format: str = Query("rst", pattern=FORMAT_PATTERN),
                    speedup: bool = False, session: Session = Depends(get_session)):
    """A campaign's report (campaign table, comparisons against the first server,
    memory table) as a download; the same bytes as ``xferlab export ID --format F -o FILE``
    (without the token, failure reasons about the hosts inventory are replaced by a generic
    line). 404 for an unknown campaign, 422 for an unknown format."""
    from runner.report.reader import load_campaign
    from runner.report.render import campaign_report

    data = load_campaign(session, campaign_id=campaign_id)
    data.failures = [(*f[:3], public_error(request, f[3]) or "") for f in data.failures]
    return _download(campaign_report(data, fmt=format, speedup=speedup), format, f"xferlab-campaign-{campaign_id}")


@router.get("/api/compare/export", dependencies=[Depends(require_read)])
def export_compare(a: str = Query(..., min_length=1, max_length=300), b: str = Query(..., min_length=1, max_length=300),
                   campaign: OptionalCampaign = None, format: str = Query("rst", pattern=FORMAT_PATTERN),
                   speedup: bool = False, session: Session = Depends(get_session)):
    """The comparison table of ``a`` (reference) and ``b`` as a download; operands as
    ``xferlab compare`` (``ID``, ``ID:SERVER`` or ``SERVER`` looked up in ``campaign``);
    the same bytes as ``xferlab compare A B --format F -o FILE``. 404 when an operand
    does not resolve."""
    from runner.report.render import compare_report

    body = compare_report(session, a, b, campaign=campaign, fmt=format, speedup=speedup)
    return _download(body, format, f"xferlab-compare-{a}-vs-{b}")
