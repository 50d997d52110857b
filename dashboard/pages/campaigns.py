"""Campaign pages: the list (``/``), one campaign's live page and its tables fragment, and
the cancel button."""
from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from sqlalchemy.orm import Session

from dashboard.deps import CampaignId, SessionDep
from dashboard.security import TokenRequired
from dashboard.services.campaigns import campaign_detail, list_campaigns, redact
from dashboard.templating import render
from runner.store import queries

router = APIRouter()


@router.get("/")
def page_index(request: Request, session: SessionDep):
    return render(request, "index.html", campaigns=[redact(request, c) for c in list_campaigns(session, limit=200)])


@router.get("/campaigns/{campaign_id}")
def page_campaign(request: Request, campaign_id: CampaignId, session: SessionDep):
    detail = redact(request, campaign_detail(session, campaign_id=campaign_id))
    labels = queries.server_labels(session, campaign_id=campaign_id)
    tables, context = _tables(session, campaign_id, context=True)
    from dashboard.services.profiles import campaign_profiles

    return render(request, "campaign.html", c=detail, labels=labels, tables=tables, context=context,
                  profiles=campaign_profiles(session, campaign_id=campaign_id))


def _tables(session: Session, campaign_id: int, *, context: bool = False):
    """The campaign table so far (and seed 002's upload table of a campaign with
    ``http_upload`` cells: runner.report.uploads; the real-client tables of seeds 003 and 004:
    runner.report.clients; the per-operation and per-bucket tables of the mixed cells:
    runner.report.mixed; each capacity search's headline and steps: runner.report.capacity;
    the kernel TCP counters of the cells where one was non-zero:
    runner.report.tcp; the profiled cells' profiler, version and rate: runner.report.profiles);
    with ``context``, ``(that list, the "Conducted on" and "Setup" tables as the exports have
    them: runner.report.context)``."""
    from runner.report.capacity import capacity_tables
    from runner.report.clients import client_tables
    from runner.report.context import context_table, setup_table
    from runner.report.mixed import mixed_tables
    from runner.report.profiles import profile_table
    from runner.report.reader import load_campaign
    from runner.report.tables import campaign_table
    from runner.report.tcp import tcp_table
    from runner.report.uploads import upload_tables

    data = load_campaign(session, campaign_id=campaign_id)
    tables = [campaign_table(data)] if data.series or data.failures else []
    tables += upload_tables(data)  # seed 002's disk/tmpfs table of an HTTP upload campaign
    tables += client_tables(data)  # seeds 003/004: real client processes
    tables += mixed_tables(data)  # the mixed workload: per operation kind and per size bucket
    tables += capacity_tables(data)  # sustainable users per search, then each search's steps
    tables += [t for t in (tcp_table(data),) if t is not None]  # listen overflows beside late sessions
    tables += [t for t in (profile_table(data),) if t is not None]  # profiler, version, rate of profiled cells
    if not context:
        return tables
    return tables, [t for t in (context_table(data.environment, data.setups), setup_table(data.servers, data.setups))
                    if t is not None]


@router.get("/campaigns/{campaign_id}/figures")
def page_campaign_figures(request: Request, campaign_id: CampaignId, session: SessionDep):
    """HTML fragment: the campaign table so far (refreshed by the page as cells land)."""
    queries.get_campaign(session, campaign_id=campaign_id)
    return render(request, "_figures.html", tables=_tables(session, campaign_id))


@router.post("/campaigns/{campaign_id}/cancel", dependencies=[TokenRequired])
def page_cancel(campaign_id: CampaignId, session: SessionDep):
    from runner.store import campaigns as crud

    crud.cancel_campaign(session, campaign_id=campaign_id)
    return RedirectResponse(f"/campaigns/{campaign_id}", status_code=303)
