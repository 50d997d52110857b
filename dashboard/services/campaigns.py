"""Campaign progress as the API and the pages show it: the list, one campaign's running
cells, failures and latest figures, the estimated time left, redacted for the viewer."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import Request
from pydantic import BaseModel
from sqlalchemy.orm import Session

from dashboard.security import public_error
from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.spec.model import redacted, secret_values
from runner.spec.redaction import scrub
from runner.store import queries
from runner.store.models import Campaign, Cell


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


def workload_title(workload: str, params: dict[str, Any]) -> str:
    """The title of ``workload`` with ``params`` (e.g. its file size); the workload's generic
    title when the parameters do not validate, the bare name for an unknown workload."""
    info = WORKLOADS.get(workload)
    if info is None:
        return workload
    try:
        return info.title_for(WorkloadParams.model_validate(params))
    except ValueError:
        return info.title


def _cell_info(cell: Cell, figure: str | None = None, secrets: frozenset[str] = frozenset()) -> CellInfo:
    """The cell as the API shows it, its error scrubbed of ``secrets`` (runner.spec.redaction.scrub)."""
    dur = None
    if cell.started_at and cell.finished_at:
        dur = (cell.finished_at - cell.started_at).total_seconds()
    return CellInfo(seq=cell.seq, server=cell.server_label, workload=cell.workload,
                    title=workload_title(cell.workload, cell.params), repeat=cell.repeat, status=cell.status,
                    error=scrub(cell.error, secrets), worker=cell.worker, started_at=cell.started_at,
                    finished_at=cell.finished_at, duration_s=dur, figure=figure)


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


def list_campaigns(session: Session, *, limit: int = 100, offset: int = 0) -> list[CampaignInfo]:
    """Campaigns, newest first (``limit`` 1..1000)."""
    camps = queries.latest_campaigns(session, limit=limit, offset=offset)
    ids = [c.id for c in camps]
    counts = queries.cell_status_counts(session, campaign_ids=ids)
    means = queries.mean_cell_seconds(session, campaign_ids=ids)
    return [_info(c, counts[c.id], means.get(c.id)) for c in camps]


def _figures(session: Session, cells: list[Cell]) -> dict[int, str]:
    """``{cell id: headline figure as text}`` of ``cells`` (their workload's primary metric)."""
    from runner.report import fmt

    values = queries.cell_values(session, cell_ids=[c.id for c in cells], metrics=("throughput", "elapsed"))
    figures: dict[int, str] = {}
    for c in cells:
        info = WORKLOADS.get(c.workload)
        m = info.primary if info else "elapsed"
        if (c.id, m) in values:
            figures[c.id] = fmt.value(*values[(c.id, m)])
    return figures


def campaign_detail(session: Session, *, campaign_id: int, latest: int = 10) -> CampaignDetail:
    """One campaign's progress, its spec redacted and its cells' errors scrubbed of the
    spec's secrets (runner.spec.redaction). Raises LookupError for an unknown id."""
    camp = queries.get_campaign(session, campaign_id=campaign_id)
    secrets = secret_values(camp.spec)
    counts = queries.cell_status_counts(session, campaign_ids=[camp.id])[camp.id]
    mean = queries.mean_cell_seconds(session, campaign_ids=[camp.id]).get(camp.id)
    running = queries.cells_with_status(session, campaign_id=camp.id, statuses=("running",))
    failures = queries.cells_with_status(session, campaign_id=camp.id, statuses=("failed", "skipped"))
    last = queries.latest_done_cells(session, campaign_id=camp.id, limit=latest)
    figures = _figures(session, last)
    return _info(camp, counts, mean, CampaignDetail,
                 running=[_cell_info(c, secrets=secrets) for c in running],
                 failures=[_cell_info(c, secrets=secrets) for c in failures],
                 latest=[_cell_info(c, figures.get(c.id), secrets) for c in last],
                 spec=redacted(camp.spec))


def redact(request: Request, info: CampaignInfo) -> CampaignInfo:
    """``info`` with the campaign's and its cells' errors as this viewer may see them
    (:func:`dashboard.security.public_error`: no inventory file details without the token)."""
    info.error = public_error(request, info.error)
    if isinstance(info, CampaignDetail):
        for c in (*info.running, *info.failures, *info.latest):
            c.error = public_error(request, c.error)
    return info
