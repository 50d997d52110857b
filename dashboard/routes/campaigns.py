"""Campaigns: the list, one campaign's live progress, cancel."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse
from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from dashboard.deps import INT4_MAX, CampaignId, get_session, public_error, render, require_read, require_token
from runner.catalogue.workloads import WORKLOADS
from runner.spec.model import redacted, secret_values
from runner.spec.redaction import scrub
from runner.store.models import Campaign, Cell, Sample

router = APIRouter()


class CellInfo(BaseModel):
    """A cell as the progress API shows it (times ISO 8601, duration in s)."""

    seq: int
    server: str
    workload: str
    title: str
    repeat: int
    status: str
    error: str | None = None
    worker: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_s: float | None = None
    figure: str | None = None


class CampaignInfo(BaseModel):
    """A campaign's status and progress.

    ``eta_s``: estimated seconds left = mean duration of the finished cells x cells
    still queued (plus half a cell per running one); None before the first cell finishes.
    """

    id: int
    name: str
    status: str
    backend: str
    created_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    cells_total: int
    cells_done: int
    cells_failed: int
    cells_skipped: int
    cells_queued: int = 0
    cells_running: int = 0
    cells_cancelled: int = 0
    servers: list[str] = []
    eta_s: float | None = None
    error: str | None = None


class CampaignDetail(CampaignInfo):
    """CampaignInfo plus the running cells, failures with their reason, and the
    latest finished cells with their headline figure. ``spec`` is the stored spec with every
    secret field (runner.spec.redaction: an external server's password, ``hosts.inventory``)
    replaced by ``"********"``, for every reader."""

    running: list[CellInfo] = []
    failures: list[CellInfo] = []
    latest: list[CellInfo] = []
    spec: dict[str, Any] = {}


def _title(cell: Cell) -> str:
    info = WORKLOADS.get(cell.workload)
    if info is None:
        return cell.workload
    from runner.catalogue.workloads import WorkloadParams

    try:
        return info.title_for(WorkloadParams.model_validate(cell.params))
    except ValueError:
        return info.title


def _cell_info(cell: Cell, figure: str | None = None, secrets: frozenset[str] = frozenset()) -> CellInfo:
    """The cell as the API shows it, its error scrubbed of ``secrets`` (runner.spec.redaction.scrub)."""
    dur = None
    if cell.started_at and cell.finished_at:
        dur = (cell.finished_at - cell.started_at).total_seconds()
    return CellInfo(seq=cell.seq, server=cell.server_label, workload=cell.workload, title=_title(cell),
                    repeat=cell.repeat, status=cell.status, error=scrub(cell.error, secrets), worker=cell.worker,
                    started_at=cell.started_at, finished_at=cell.finished_at, duration_s=dur, figure=figure)


def _counts(session: Session, ids: list[int]) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {i: {} for i in ids}
    if ids:
        for cid, status, n in session.execute(select(Cell.campaign_id, Cell.status, func.count())
                                              .where(Cell.campaign_id.in_(ids))
                                              .group_by(Cell.campaign_id, Cell.status)):
            out[cid][status] = n
    return out


def _info(camp: Campaign, counts: dict[str, int], mean_s: float | None, cls=CampaignInfo, **extra):
    queued, running = counts.get("queued", 0), counts.get("running", 0)
    eta = None
    if mean_s is not None and camp.status in ("queued", "running"):
        eta = mean_s * (queued + 0.5 * running)
    servers = [s.get("label") or " ".join(x for x in (s.get("name"), s.get("version")) if x)
               for s in (camp.spec or {}).get("servers", [])]
    return cls(id=camp.id, name=camp.name, status=camp.status, backend=camp.backend, created_at=camp.created_at,
               started_at=camp.started_at, finished_at=camp.finished_at, cells_total=camp.cells_total,
               cells_done=camp.cells_done, cells_failed=camp.cells_failed, cells_skipped=camp.cells_skipped,
               cells_queued=queued, cells_running=running, cells_cancelled=counts.get("cancelled", 0),
               servers=servers, eta_s=eta, error=scrub(camp.error, secret_values(camp.spec)), **extra)


def _mean_durations(session: Session, ids: list[int]) -> dict[int, float]:
    if not ids:
        return {}
    rows = session.execute(select(Cell.campaign_id, func.avg(func.extract("epoch", Cell.finished_at - Cell.started_at)))
                           .where(Cell.campaign_id.in_(ids), Cell.status.in_(("done", "failed")),
                                  Cell.started_at.is_not(None), Cell.finished_at.is_not(None))
                           .group_by(Cell.campaign_id)).all()
    return {cid: float(v) for cid, v in rows if v is not None}


def list_campaigns(session: Session, *, limit: int = 100, offset: int = 0) -> list[CampaignInfo]:
    """Campaigns, newest first (``limit`` 1..1000)."""
    camps = session.scalars(select(Campaign).order_by(Campaign.id.desc()).limit(limit).offset(offset)).all()
    ids = [c.id for c in camps]
    counts, means = _counts(session, ids), _mean_durations(session, ids)
    return [_info(c, counts[c.id], means.get(c.id)) for c in camps]


def campaign_detail(session: Session, *, campaign_id: int, latest: int = 10) -> CampaignDetail:
    """One campaign's progress, its spec redacted and its cells' errors scrubbed of the
    spec's secrets (runner.spec.redaction). Raises LookupError for an unknown id."""
    camp = session.get(Campaign, campaign_id)
    if camp is None:
        raise LookupError(f"no campaign {campaign_id}")
    secrets = secret_values(camp.spec)
    counts = _counts(session, [camp.id])[camp.id]
    mean = _mean_durations(session, [camp.id]).get(camp.id)
    running = session.scalars(select(Cell).where(Cell.campaign_id == camp.id, Cell.status == "running")
                              .order_by(Cell.seq)).all()
    failures = session.scalars(select(Cell).where(Cell.campaign_id == camp.id,
                                                  Cell.status.in_(("failed", "skipped")))
                               .order_by(Cell.seq)).all()
    last = session.scalars(select(Cell).where(Cell.campaign_id == camp.id, Cell.status == "done")
                           .order_by(Cell.finished_at.desc()).limit(latest)).all()
    figures: dict[int, str] = {}
    if last:
        from runner.report import fmt

        rows = session.execute(select(Sample.cell_id, Sample.metric, Sample.value, Sample.unit)
                               .where(Sample.cell_id.in_([c.id for c in last]), Sample.stat == "value",
                                      Sample.metric.in_(("throughput", "elapsed")))).all()
        by_cell = {(cid, m): (v, u) for cid, m, v, u in rows}
        for c in last:
            info = WORKLOADS.get(c.workload)
            m = info.primary if info else "elapsed"
            if (c.id, m) in by_cell:
                v, u = by_cell[(c.id, m)]
                figures[c.id] = fmt.value(v, u)
    return _info(camp, counts, mean, CampaignDetail,
                 running=[_cell_info(c, secrets=secrets) for c in running],
                 failures=[_cell_info(c, secrets=secrets) for c in failures],
                 latest=[_cell_info(c, figures.get(c.id), secrets) for c in last],
                 spec=redacted(camp.spec))


def redact(request: Request, info: CampaignInfo) -> CampaignInfo:
    """``info`` with the campaign's and its cells' errors as this viewer may see them
    (:func:`dashboard.deps.public_error`: no inventory file details without the token)."""
    info.error = public_error(request, info.error)
    if isinstance(info, CampaignDetail):
        for c in (*info.running, *info.failures, *info.latest):
            c.error = public_error(request, c.error)
    return info


# -- API ----------------------------------------------------------------------

@router.get("/api/campaigns", response_model=list[CampaignInfo], tags=["campaigns"],
            dependencies=[Depends(require_read)])
def api_campaigns(request: Request, limit: int = Query(100, ge=1, le=1000), offset: int = Query(0, ge=0, le=INT4_MAX),
                  session: Session = Depends(get_session)):
    """Campaigns, newest first, with progress counters and the estimated time left."""
    return [redact(request, c) for c in list_campaigns(session, limit=limit, offset=offset)]


@router.get("/api/campaigns/{campaign_id}", response_model=CampaignDetail, tags=["campaigns"],
            dependencies=[Depends(require_read)])
def api_campaign(request: Request, campaign_id: CampaignId, session: Session = Depends(get_session)):
    """One campaign: progress, running cell, failures with their reason, latest figures, ETA (s). 404 if unknown.
    Without the token, reasons about the hosts inventory are replaced by a generic line."""
    return redact(request, campaign_detail(session, campaign_id=campaign_id))


@router.post("/api/campaigns/{campaign_id}/cancel", response_model=CampaignInfo, tags=["campaigns"],
             dependencies=[Depends(require_token)])
def api_cancel(campaign_id: CampaignId, session: Session = Depends(get_session)):
    """Cancel a queued or running campaign (queued cells are cancelled; a running cell
    finishes). 404 for an unknown id, 409 when it already finished. Needs the token."""
    from fastapi import HTTPException

    from runner.store import campaigns as crud

    try:
        crud.cancel_campaign(session, campaign_id=campaign_id)
    except ValueError as exc:
        raise HTTPException(409, str(exc)) from None
    return campaign_detail(session, campaign_id=campaign_id)


# -- pages --------------------------------------------------------------------

@router.get("/", include_in_schema=False, dependencies=[Depends(require_read)])
def page_index(request: Request, session: Session = Depends(get_session)):
    return render(request, "index.html", campaigns=[redact(request, c) for c in list_campaigns(session, limit=200)])


@router.get("/campaigns/{campaign_id}", include_in_schema=False, dependencies=[Depends(require_read)])
def page_campaign(request: Request, campaign_id: CampaignId, session: Session = Depends(get_session)):
    detail = redact(request, campaign_detail(session, campaign_id=campaign_id))
    labels = list(dict.fromkeys(session.scalars(select(Cell.server_label).where(Cell.campaign_id == campaign_id)
                                                .order_by(Cell.seq))))
    tables, context = _tables(session, campaign_id, context=True)
    return render(request, "campaign.html", c=detail, labels=labels, tables=tables, context=context)


def _tables(session: Session, campaign_id: int, *, context: bool = False):
    """The campaign table so far (and seed 002's upload table of a campaign with
    ``http_upload`` cells: runner.report.uploads; the real-client tables of seeds 003 and 004:
    runner.report.clients); with ``context``, ``(that list, the "Conducted on" and
    "Setup" tables as the exports have them: runner.report.context)``."""
    from runner.report.clients import client_tables
    from runner.report.context import context_table, setup_table
    from runner.report.reader import load_campaign
    from runner.report.tables import campaign_table
    from runner.report.uploads import upload_tables

    data = load_campaign(session, campaign_id=campaign_id)
    tables = [campaign_table(data)] if data.series or data.failures else []
    tables += upload_tables(data)  # seed 002's disk/tmpfs table of an HTTP upload campaign
    tables += client_tables(data)  # seeds 003/004: real client processes
    if not context:
        return tables
    return tables, [t for t in (context_table(data.environment, data.setups), setup_table(data.servers, data.setups))
                    if t is not None]


@router.get("/campaigns/{campaign_id}/figures", include_in_schema=False, dependencies=[Depends(require_read)])
def page_campaign_figures(request: Request, campaign_id: CampaignId, session: Session = Depends(get_session)):
    """HTML fragment: the campaign table so far (refreshed by the page as cells land)."""
    if session.get(Campaign, campaign_id) is None:
        raise LookupError(f"no campaign {campaign_id}")
    return render(request, "_figures.html", tables=_tables(session, campaign_id))


@router.post("/campaigns/{campaign_id}/cancel", include_in_schema=False, dependencies=[Depends(require_token)])
def page_cancel(campaign_id: CampaignId, session: Session = Depends(get_session)):
    from runner.store import campaigns as crud

    crud.cancel_campaign(session, campaign_id=campaign_id)
    return RedirectResponse(f"/campaigns/{campaign_id}", status_code=303)
