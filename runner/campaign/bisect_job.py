"""A bisect queued for the workers (the dashboard's bisect form): its request, validated by
the same spec model as ``xferlab bisect``; its row in ``bisect_job`` (runner.store.models.BisectJob);
claiming it (``SELECT ... FOR UPDATE SKIP LOCKED``, so two workers never run one bisect);
and running it with runner.campaign.bisect.Bisector, storing each step and progress line
as it comes.

A worker runs a bisect in one go, as ``xferlab bisect`` does: its campaigns are owned by
the worker (no other worker claims their cells) and stored as they end. A worker that dies
mid-bisect leaves the row ``running``; :func:`reap_dead_bisects` (run at every worker start
on the same host) marks it ``failed``, its finished campaigns stay stored.

:func:`cancel` (the job page's button, ``xferlab bisect-cancel``) marks a bisect
``cancelled``: a queued one is never claimed; of a running one the step's campaign is
cancelled as any campaign is (runner.store.campaigns.cancel_campaign: its queued cells
cancelled, the cell in flight finishes and is stored), and the worker stops the bisect
once that cell is stored, setting ``finished_at``. The row lock taken by the cancel and by
the worker when it records a step's campaign (``campaign_id``) makes sure that campaign
is cancelled whichever comes first.
"""
from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from runner.campaign.bisect import BisectError, Bisector, Cancelled, Step
from runner.campaign.loop import Reporter
from runner.spec.model import CampaignSpec, SpecError, parse_spec
from runner.spec.source import check_ref
from runner.store import campaigns as crud
from runner.store.models import BisectJob

#: A metric name: lower-case letters, digits and ``_`` (it is only ever compared with the
#: stored samples' ``metric`` column).
METRIC_RE = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
#: Progress lines kept per bisect (the newest).
MAX_LOG = 500


class BisectRequest(BaseModel):
    """What ``xferlab bisect`` takes, as one validated value (the dashboard's form).

    Attributes:
        server: the server kind built from source (runner.spec.source.SOURCE_SERVERS).
        source: its git checkout (a directory on the worker's host) or git URL.
        good, bad: refs (runner.spec.source.check_ref); ``bad`` a descendant of ``good``.
        workload: a workload name; params: its parameters (runner.catalogue.workloads.WorkloadParams).
        metric: the figure that regressed (:data:`METRIC_RE`), e.g. ``elapsed``.
        repeats: repeats per measured commit (3 to 50); max_rounds: most measurements of an
            undecided commit (1 to 5); min_effect: the smallest good/bad relative change (0 to 10).
        backend: ``auto``, ``local`` or ``docker``; warmup: an unrecorded pass before each cell.
    """

    model_config = ConfigDict(extra="forbid")

    server: str = Field(min_length=1, max_length=40)
    source: str = Field(min_length=1, max_length=1000)
    good: str = Field(min_length=1, max_length=220)
    bad: str = Field(min_length=1, max_length=220)
    workload: str = Field(min_length=1, max_length=40)
    params: dict[str, Any] = Field(default_factory=dict)
    metric: str
    repeats: int = Field(5, ge=3, le=50)
    max_rounds: int = Field(3, ge=1, le=5)
    min_effect: float = Field(0.05, ge=0, le=10)
    backend: Literal["auto", "local", "docker"] = "auto"
    warmup: bool = True

    @field_validator("good", "bad")
    @classmethod
    def _ref(cls, v: str) -> str:
        return check_ref(v)

    @field_validator("metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        if not METRIC_RE.fullmatch(v):
            raise ValueError(f"not a metric name: {v[:60]!r} (lower-case letters, digits and '_', e.g. elapsed)")
        return v


def spec_of(req: BisectRequest) -> CampaignSpec:
    """The campaign spec each step runs (``ref`` replaced per commit), as ``xferlab bisect``
    builds it. Raises SpecError (paths ``servers.0.*``, ``workloads.0.*``...)."""
    data: dict[str, Any] = {
        "name": f"bisect {req.server}", "repeats": req.repeats, "backend": req.backend, "warmup": req.warmup,
        "servers": [{"name": req.server, "source": req.source, "ref": req.bad}],
        "workloads": [{"name": req.workload, "params": dict(req.params)}]}
    return parse_spec(data, "bisect", from_dashboard=True)  # only the dashboard queues a bisect job


#: Spec error paths -> the request field they belong to.
_SPEC_FIELDS = {"servers.0.name": "server", "servers.0.source": "source", "servers.0.ref": "bad",
                "servers.0": "source", "workloads.0.name": "workload", "workloads.0": "workload",
                "repeats": "repeats", "backend": "backend", "warmup": "warmup"}


def validate(data: dict[str, Any]) -> tuple[BisectRequest | None, dict[str, str]]:
    """``data`` as a request checked by :class:`BisectRequest` and by the spec model (what
    the CLI checks: the server builds from source, the source exists or is an allowed URL,
    the workload and its parameters). Returns (the request, {}) or (None, {field: message})
    with the field a message belongs to (``params.clients`` for a workload parameter,
    ``""`` for one of no field)."""
    try:
        req = BisectRequest.model_validate(data)
    except ValidationError as exc:
        errors: dict[str, str] = {}
        for e in exc.errors():
            loc = ".".join(str(x) for x in e["loc"])
            errors.setdefault(loc, str(e["msg"]).removeprefix("Value error, "))
        return None, errors
    try:
        spec_of(req)
    except SpecError as exc:
        errors = {}
        for path, msg in exc.errors:
            parts = path.split(".")
            if len(parts) >= 4 and parts[:3] == ["workloads", "0", "params"]:
                key = f"params.{parts[3]}"
            elif path == "servers.0" and "cannot be built from source" in msg:
                key = "server"
            else:
                key = next((f for p, f in _SPEC_FIELDS.items() if path == p or path.startswith(p + ".")), "")
            errors.setdefault(key, msg)
        return None, errors
    return req, {}


def queue(session: Session, req: BisectRequest) -> int:
    """Insert a queued bisect; commits; returns its id."""
    job = BisectJob(request=req.model_dump(mode="json"), status="queued", steps=[], log=[])
    session.add(job)
    session.commit()
    return job.id


def claim_next(session: Session, worker: str) -> int | None:
    """Claim the oldest queued bisect for ``worker`` (``host:pid``): mark it ``running``;
    commits; its id, or None when none is queued."""
    job = session.scalars(select(BisectJob).where(BisectJob.status == "queued").order_by(BisectJob.id)
                          .limit(1).with_for_update(skip_locked=True)).first()
    if job is None:
        session.commit()
        return None
    job.status, job.owner, job.started_at = "running", worker, datetime.now(UTC)
    session.commit()
    return job.id


def reap_dead_bisects(session: Session, host: str) -> int:
    """Mark ``failed`` the running bisects of workers on ``host`` whose process is gone, and
    finish (``finished_at``) the cancelled ones such a worker was still stopping; commits;
    how many."""
    n = 0
    for job in session.scalars(select(BisectJob).where(
            BisectJob.owner.like(f"{host}:%"), BisectJob.finished_at.is_(None),
            BisectJob.status.in_(("running", "cancelled")))):
        pid = (job.owner or "").rpartition(":")[2]
        if pid.isdigit() and not crud.pid_alive(int(pid)):
            if job.status == "running":
                job.status = "failed"
                job.error = f"the worker {job.owner} running it stopped; its finished steps are stored campaigns"
            job.finished_at, job.campaign_id = datetime.now(UTC), None
            n += 1
    session.commit()
    return n


def cancel(session: Session, job_id: int, by: str) -> BisectJob:
    """Cancel the queued or running bisect ``job_id`` (``by``: who, for its ``error`` line,
    e.g. ``from the dashboard``): status ``cancelled``; a queued one is finished at once and
    never claimed; of a running one the campaign of the step in flight is cancelled
    (runner.store.campaigns.cancel_campaign) and its worker sets ``finished_at`` when the
    cell in flight is stored. Commits. Raises LookupError for an unknown id, ValueError for
    a bisect already ``done``, ``failed`` or ``cancelled``."""
    job = session.scalars(select(BisectJob).where(BisectJob.id == job_id).with_for_update()).first()
    if job is None:
        session.rollback()
        raise LookupError(f"no bisect {job_id}")
    if job.status not in ("queued", "running"):
        session.rollback()
        raise ValueError(f"bisect {job_id} is already {job.status}")
    now = datetime.now(UTC)
    running = job.status == "running"
    if running:
        job.error = f"cancelled {by} while running; the finished steps are stored campaigns"
    else:
        job.finished_at, job.error = now, f"cancelled {by} before a worker started it"
    job.status = "cancelled"
    job.log = [*job.log, f"{now:%H:%M:%S} {job.error}"][-MAX_LOG:]
    if running and job.campaign_id is not None:
        try:  # commits the row above with it
            crud.cancel_campaign(session, campaign_id=job.campaign_id)
        except ValueError:  # the step's campaign already ended: the worker stops before the next
            pass
    session.commit()
    return job


def step_json(st: Step) -> dict[str, Any]:
    """A Step as stored in ``bisect_job.steps``."""
    return dataclasses.asdict(st)


def run_job(engine: Engine, job_id: int, reporter: Reporter) -> str:
    """Run the claimed bisect ``job_id`` to its end, storing the range's order, each progress
    line, step, the campaign in flight and the answer as they come. Returns the final status
    (``done``, ``failed`` or ``cancelled``: :func:`cancel` was called, the bisect stopped
    after the cell in flight); never raises for a bisect that stops (BisectError, a spec
    that no longer validates, a failed build): the row says why."""
    from runner.backends.base import ServerFailed

    def locked(s: Session) -> BisectJob:
        return s.scalars(select(BisectJob).where(BisectJob.id == job_id).with_for_update()).one()

    def update(**kw: Any) -> None:
        with Session(engine) as s:
            job = locked(s)
            for k, v in kw.items():
                setattr(job, k, v)
            s.commit()

    def add(field: str, item: Any) -> None:
        with Session(engine) as s:
            job = locked(s)
            items = [*getattr(job, field), item]
            setattr(job, field, items[-MAX_LOG:] if field == "log" else items)
            s.commit()

    def say(text: str) -> None:
        add("log", f"{datetime.now(UTC):%H:%M:%S} {text}")

    def on_campaign(cid: int) -> None:
        """Record the step's campaign; cancel it at once when the bisect was cancelled
        before (the row lock orders this against :func:`cancel`)."""
        with Session(engine) as s:
            job = locked(s)
            job.campaign_id = cid
            if job.status == "cancelled":
                crud.cancel_campaign(s, campaign_id=cid)
            s.commit()

    def should_stop() -> str | None:
        with Session(engine) as s:
            job = s.get(BisectJob, job_id)
            return "cancelled" if job is None or job.status == "cancelled" else None

    with Session(engine) as s:
        job = s.get(BisectJob, job_id)
        if job is None:
            raise LookupError(f"no bisect {job_id}")
        raw = dict(job.request)
    try:
        req = BisectRequest.model_validate(raw)
        b = Bisector(engine, spec_of(req), workload=req.workload, metric=req.metric, reporter=reporter, say=say,
                     min_effect=req.min_effect, max_rounds=req.max_rounds,
                     on_step=lambda st: add("steps", step_json(st)),
                     on_progress=lambda left, steps: update(commits_left=left, steps_left=steps + 1),
                     on_order=lambda commits: update(commits=commits), on_campaign=on_campaign,
                     should_stop=should_stop)
        res = b.run(req.good, req.bad)
    except Cancelled as exc:
        say(f"bisect stopped: {exc}")
        update(finished_at=datetime.now(UTC), campaign_id=None)
        return "cancelled"
    except (BisectError, ServerFailed, SpecError, ValidationError, ValueError) as exc:
        say(f"bisect stopped: {exc}")
        return _finish(engine, job_id, status="failed", error=str(exc))
    state = "confirmed" if res.confirmed else "NOT confirmed by the re-measure"
    say(f"first bad commit: {res.first_bad} {res.subject} ({state})")
    return _finish(engine, job_id, status="done", first_bad=res.first_bad, subject=res.subject,
                   confirmed=res.confirmed, steps_left=0, commits_left=1)


def _finish(engine: Engine, job_id: int, *, status: str, **kw: Any) -> str:
    """Close the running bisect ``job_id`` as ``status`` with the columns ``kw``; one
    cancelled meanwhile stays ``cancelled`` (the answer, if any, is stored with it).
    Returns the status it ends with."""
    with Session(engine) as s:
        job = s.scalars(select(BisectJob).where(BisectJob.id == job_id).with_for_update()).one()
        if job.status == "cancelled":
            kw.pop("error", None)  # the cancel's reason stays
        else:
            job.status = status
        for k, v in kw.items():
            setattr(job, k, v)
        job.finished_at, job.campaign_id = datetime.now(UTC), None
        s.commit()
        return job.status


def stop_job(session: Session, job_id: int, why: str) -> None:
    """Mark the running bisect ``job_id`` ``failed`` with ``why`` (its worker was asked to
    stop, or failed), or finish one cancelled meanwhile (it stays ``cancelled``); commits."""
    job = session.get(BisectJob, job_id)
    if job is not None and job.status == "running":
        job.status, job.finished_at, job.error = "failed", datetime.now(UTC), why
    elif job is not None and job.status == "cancelled" and job.finished_at is None:
        job.finished_at = datetime.now(UTC)
    if job is not None:
        job.campaign_id = None
    session.commit()

