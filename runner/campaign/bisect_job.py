"""A bisect queued for the workers (the dashboard's bisect form): its request, validated by
the same spec model as ``xferlab bisect``; its row in ``bisect_job`` (runner.store.models.BisectJob);
claiming it (``SELECT ... FOR UPDATE SKIP LOCKED``, so two workers never run one bisect);
and running it with runner.campaign.bisect.Bisector, storing each step and progress line
as it comes.

A worker runs a bisect in one go, as ``xferlab bisect`` does: its campaigns are owned by
the worker (no other worker claims their cells) and stored as they end. A worker that dies
mid-bisect leaves the row ``running``; :func:`reap_dead_bisects` (run at every worker start
on the same host) marks it ``failed``, its finished campaigns stay stored.
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

from runner.campaign.bisect import BisectError, Bisector, Step
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
    """Mark ``failed`` the running bisects of workers on ``host`` whose process is gone;
    commits; how many."""
    n = 0
    for job in session.scalars(select(BisectJob).where(BisectJob.status == "running",
                                                       BisectJob.owner.like(f"{host}:%"))):
        pid = (job.owner or "").rpartition(":")[2]
        if pid.isdigit() and not crud.pid_alive(int(pid)):
            job.status, job.finished_at = "failed", datetime.now(UTC)
            job.error = f"the worker {job.owner} running it stopped; its finished steps are stored campaigns"
            n += 1
    session.commit()
    return n


def step_json(st: Step) -> dict[str, Any]:
    """A Step as stored in ``bisect_job.steps``."""
    return dataclasses.asdict(st)


def run_job(engine: Engine, job_id: int, reporter: Reporter) -> str:
    """Run the claimed bisect ``job_id`` to its end, storing each progress line, step and
    the answer as they come. Returns the final status (``done`` or ``failed``); never
    raises for a bisect that stops (BisectError, a spec that no longer validates, a failed
    build): the row says why."""
    from runner.backends.base import ServerFailed

    def update(**kw: Any) -> None:
        with Session(engine) as s:
            job = s.get(BisectJob, job_id)
            assert job is not None
            for k, v in kw.items():
                setattr(job, k, v)
            s.commit()

    def add(field: str, item: Any) -> None:
        with Session(engine) as s:
            job = s.scalars(select(BisectJob).where(BisectJob.id == job_id).with_for_update()).one()
            items = [*getattr(job, field), item]
            setattr(job, field, items[-MAX_LOG:] if field == "log" else items)
            s.commit()

    def say(text: str) -> None:
        add("log", f"{datetime.now(UTC):%H:%M:%S} {text}")

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
                     on_progress=lambda left, steps: update(commits_left=left, steps_left=steps + 1))
        res = b.run(req.good, req.bad)
    except (BisectError, ServerFailed, SpecError, ValidationError, ValueError) as exc:
        say(f"bisect stopped: {exc}")
        update(status="failed", error=str(exc), finished_at=datetime.now(UTC))
        return "failed"
    state = "confirmed" if res.confirmed else "NOT confirmed by the re-measure"
    say(f"first bad commit: {res.first_bad} {res.subject} ({state})")
    update(status="done", first_bad=res.first_bad, subject=res.subject, confirmed=res.confirmed, steps_left=0,
           commits_left=1, finished_at=datetime.now(UTC))
    return "done"


def stop_job(session: Session, job_id: int, why: str) -> None:
    """Mark the running bisect ``job_id`` ``failed`` with ``why`` (its worker was asked to
    stop, or failed); commits."""
    job = session.get(BisectJob, job_id)
    if job is not None and job.status == "running":
        job.status, job.finished_at, job.error = "failed", datetime.now(UTC), why
    session.commit()

