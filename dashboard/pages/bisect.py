"""The bisect pages: ``/bisect`` (the form that queues a bisect for the workers, and the
list of bisects) and ``/bisect/{id}`` (its progress, steps as a chart over the range's
commits in the repository's order, the first bad commit and its confirmation, the cancel
button: ``POST /bisect/{id}/cancel``). A field error is shown beside the field it names."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from dashboard.deps import BisectId, PageError, SessionDep
from dashboard.security import TokenRequired
from dashboard.services.bisect import DEFAULTS, PARAM_FIELDS, chart_data, form_to_request, list_jobs, repo_positions
from dashboard.templating import render
from runner.campaign import bisect_job
from runner.catalogue.workloads import WORKLOADS
from runner.spec.source import SOURCE_SERVERS
from runner.store.models import BisectJob

router = APIRouter(prefix="/bisect")


def _form(request: Request, session, values: dict[str, str] | None = None, errors: dict[str, str] | None = None,
          status_code: int = 200):
    ctx: dict[str, Any] = {"values": values if values is not None else dict(DEFAULTS), "errors": errors or {},
                           "servers": SOURCE_SERVERS, "workloads": sorted(WORKLOADS),
                           "param_fields": PARAM_FIELDS, "jobs": list_jobs(session)}
    return render(request, "bisect.html", status_code=status_code, **ctx)


@router.get("")
def page_bisect(request: Request, session: SessionDep):
    """The form and the newest bisects."""
    return _form(request, session)


@router.post("", dependencies=[TokenRequired])
async def page_bisect_post(request: Request, session: SessionDep):
    """Validate the form (runner.campaign.bisect_job.validate) and queue the bisect: 303 to
    its page; 422 with the form and each error beside its field."""
    form = await request.form(max_files=0, max_fields=40)
    values = {k: str(v)[:2000] for k, v in form.items() if isinstance(v, str)}
    req, errors = await run_in_threadpool(form_to_request, values)
    if req is None:
        return _form(request, session, values, errors, status_code=422)
    job_id = await run_in_threadpool(bisect_job.queue, session, req)
    return RedirectResponse(f"/bisect/{job_id}", status_code=303)


@router.get("/{job_id}")
def page_bisect_job(request: Request, session: SessionDep, job_id: BisectId):
    """A bisect: its request, progress (steps left) while running, the steps as a chart and
    a table with links to each step's campaigns, the answer. 404 when there is none."""
    job = session.get(BisectJob, job_id)
    if job is None:
        raise PageError(404, f"no bisect {job_id}")
    return render(request, "bisect_job.html", job=job, req=job.request, chart=chart_data(job),
                  positions=repo_positions(job))


@router.post("/{job_id}/cancel", dependencies=[TokenRequired])
def page_bisect_cancel(session: SessionDep, job_id: BisectId):
    """Cancel the bisect (runner.campaign.bisect_job.cancel): a queued one never starts; of
    a running one the step's campaign is cancelled and the worker stops after the cell in
    flight. 303 to its page; 404 unknown; 409 already finished. Needs the token and the
    CSRF token, as every form."""
    try:
        bisect_job.cancel(session, job_id, "from the dashboard")
    except LookupError as exc:
        raise PageError(404, str(exc)) from None
    except ValueError as exc:
        raise PageError(409, str(exc)) from None
    return RedirectResponse(f"/bisect/{job_id}", status_code=303)
