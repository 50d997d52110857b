"""Campaign and cell helpers: create, claim (``FOR UPDATE SKIP LOCKED``), finish, cancel.

All helpers are keyword-only and take the session in; the caller owns the
transaction (conbench ``entities/`` style). Finishing a cell commits it with its
samples in one transaction, so a crash loses at most the cell in flight.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from runner.spec.model import CampaignSpec, expand
from runner.store.models import Campaign, Cell, CellProfile, Environment, Sample, ServerBuild
from runner.store.points import refresh_points


def now() -> datetime:
    """Timezone-aware UTC now."""
    return datetime.now(UTC)


def worker_id() -> str:
    """``host:pid`` of this process, stored in the cells it claims."""
    return f"{socket.gethostname()}:{os.getpid()}"


def lab_version() -> str:
    """Installed xferlab version (``0+unknown`` when not installed as a distribution)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("xferlab")
    except PackageNotFoundError:  # pragma: no cover
        return "0+unknown"


def create_campaign(session: Session, *, spec: CampaignSpec, backend: str, status: str = "queued",
                    owner: str | None = None) -> Campaign:
    """Insert a campaign and all its cells (from :func:`runner.spec.model.expand`), status ``queued``.

    ``owner`` (``host:pid``, see :func:`worker_id`) marks a campaign run in the foreground
    by that process; workers leave it alone. None queues it for workers.
    Returns the flushed Campaign (``id`` set)."""
    camp = Campaign(name=spec.name, spec=spec.model_dump(mode="json"), status=status, backend=backend,
                    lab_version=lab_version(), cells_total=0, owner=owner)
    session.add(camp)
    session.flush()
    plans = expand(spec)
    for p in plans:
        req = p.server.request(spec.max_clients)
        session.add(Cell(campaign_id=camp.id, seq=p.seq, server=p.server.name, server_version=req.series_version,
                         variant=dict(p.server.variant), server_label=p.server.display(),
                         server_spec=p.server.model_dump(mode="json"), workload=p.workload,
                         params=p.params.model_dump(mode="json"), params_key=p.params_key, repeat=p.repeat,
                         status="queued", profiled=p.profiled))
    camp.cells_total = len(plans)
    session.flush()
    return camp


def claim_next_cell(session: Session, *, campaign_id: int | None = None, worker: str | None = None,
                    prefer: dict[str, Any] | None = None) -> Cell | None:
    """Claim the next queued cell (lowest campaign id, then seq) with
    ``SELECT ... FOR UPDATE SKIP LOCKED`` so two workers never run the same cell;
    mark it ``running`` and its campaign ``running``. Commits. Returns None when no
    queued cell is left (in ``campaign_id`` if given; without it, only in campaigns
    that no foreground process owns).

    ``prefer``: Cell column -> value (e.g. ``{"campaign_id": 3, "server_label": "tpd",
    "repeat": 0}``): the first queued cell matching all of them is claimed before any
    other (the running server can serve it: runner.cell.server_reuse); when none matches,
    the usual order applies. Raises ValueError for a name that is not a Cell column."""
    base = (select(Cell).join(Campaign).where(Cell.status == "queued", Campaign.status.in_(("queued", "running")))
            .order_by(Cell.campaign_id, Cell.seq).limit(1).with_for_update(skip_locked=True, of=Cell))
    if campaign_id is not None:
        base = base.where(Cell.campaign_id == campaign_id)
    else:  # a worker: only campaigns queued for workers, never one a foreground run owns
        base = base.where(Campaign.owner.is_(None))
    cell = None
    if prefer:
        cols = Cell.__table__.columns
        unknown = sorted(set(prefer) - set(cols.keys()))
        if unknown:
            raise ValueError(f"prefer: not a cell column: {', '.join(unknown)}")
        cell = session.scalars(base.where(*(cols[k] == v for k, v in prefer.items()))).first()
    if cell is None:
        cell = session.scalars(base).first()
    if cell is None:
        session.commit()
        return None
    cell.status = "running"
    cell.worker = worker or worker_id()
    cell.started_at = now()
    session.execute(update(Campaign).where(Campaign.id == cell.campaign_id, Campaign.status == "queued")
                    .values(status="running", started_at=now()))
    session.commit()
    return cell


def build_key(info: dict[str, Any]) -> tuple[str, str, str, str]:
    """What makes a ServerBuild row unique, from a cell's build info: (name, version,
    variant as canonical JSON, config hash)."""
    variant = info.get("variant") or {}
    return (str(info.get("name", "")), str(info.get("version") or ""), json.dumps(variant, sort_keys=True),
            str(info.get("config_hash") or ""))


def get_or_create_build(session: Session, *, info: dict[str, Any]) -> ServerBuild:
    """The ServerBuild row for ``info`` (keys: name, version, variant, config_hash, ...),
    created if new (unique on name, version, variant, config hash: :func:`build_key`)."""
    variant = info.get("variant") or {}
    name, ver, vkey, chash = build_key(info)
    row = session.scalars(select(ServerBuild).where(ServerBuild.name == name, ServerBuild.version == ver,
                                                    ServerBuild.variant_key == vkey,
                                                    ServerBuild.config_hash == chash)).first()
    if row is None:
        row = ServerBuild(name=name, version=ver, variant=variant, variant_key=vkey, config_hash=chash,
                          info=json.loads(json.dumps(info, default=str)))
        session.add(row)
        session.flush()
    return row


def environment_digest(data: dict[str, Any]) -> tuple[str, str]:
    """(sha256 hex digest, canonical JSON) of an environment snapshot: what makes an
    Environment row unique."""
    canon = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(canon.encode()).hexdigest(), canon


def get_or_create_environment(session: Session, *, data: dict[str, Any], env_class: str) -> Environment:
    """The Environment row for snapshot ``data`` (deduplicated by sha256 of its canonical JSON)."""
    digest, canon = environment_digest(data)
    row = session.scalars(select(Environment).where(Environment.digest == digest)).first()
    if row is None:
        row = Environment(digest=digest, env_class=env_class, data=json.loads(canon))
        session.add(row)
        session.flush()
    return row


class RecordCache:
    """The ids of the ServerBuild and Environment rows a campaign loop found or made, by
    their unique keys (:func:`build_key`, :func:`environment_digest`), so they are looked
    up once per server start and campaign instead of once per cell.

    Ids read or made in a transaction count only once it committed: call
    :meth:`committed` after the commit; a rolled-back attempt (runner.store.retry) leaves
    nothing behind, and the next attempt looks up again. Not thread-safe (one loop).
    ``lookups`` counts the reads of the store (get-or-create calls) it made."""

    def __init__(self) -> None:
        self._builds: dict[tuple[str, str, str, str], int] = {}
        self._envs: dict[str, int] = {}
        self._pending: list[tuple[dict, Any, int]] = []
        self.lookups = 0

    def build_id(self, session: Session, info: dict[str, Any]) -> int:
        """The id of the ServerBuild row of ``info`` (made if new)."""
        key = build_key(info)
        if key in self._builds:
            return self._builds[key]
        self.lookups += 1
        row_id = get_or_create_build(session, info=info).id
        self._pending.append((self._builds, key, row_id))
        return row_id

    def environment_id(self, session: Session, data: dict[str, Any], env_class: str) -> int:
        """The id of the Environment row of snapshot ``data`` (made if new, with ``env_class``)."""
        digest, _ = environment_digest(data)
        if digest in self._envs:
            return self._envs[digest]
        self.lookups += 1
        row_id = get_or_create_environment(session, data=data, env_class=env_class).id
        self._pending.append((self._envs, digest, row_id))
        return row_id

    def committed(self) -> None:
        """The transaction that read or made the pending ids committed: keep them."""
        for table, key, row_id in self._pending:
            table[key] = row_id
        self._pending.clear()

    def rolled_back(self) -> None:
        """Forget the ids of a transaction that did not commit."""
        self._pending.clear()


def finish_cell(session: Session, *, cell: Cell, status: str, error: str | None = None,
                samples: list[Sample] | None = None, build: ServerBuild | None = None,
                environment: Environment | None = None,
                then: Callable[[Session, Cell], object] | None = None,
                server_cpu_source: str | None = None, build_id: int | None = None,
                environment_id: int | None = None, profile: CellProfile | None = None,
                server_cpu_window: str | None = None) -> None:
    """Store a cell's outcome, samples and profile, refresh its campaign's progress and the
    history points of its group (runner.store.points.refresh_points, under the campaign's
    row lock); commits all in one transaction.

    ``status`` is ``done``, ``failed`` or ``skipped``; ``build`` / ``environment`` (or
    their ids, ``build_id`` / ``environment_id``, e.g. from :class:`RecordCache`) the rows
    the cell ran with; ``server_cpu_source`` where its ``server_cpu`` rows came from
    (``cgroup``, ``tree``; Cell.server_cpu_source) and ``server_cpu_window`` what they
    span (``span``, ``phase``; Cell.server_cpu_window); ``profile`` the server's CPU profile
    over the phase (runner.store.profiles). ``then(session, cell)`` runs after
    the samples are flushed and before the progress is counted, in the same transaction
    (runner.campaign.repeats queues another repeat there, so the campaign is not closed first)."""
    cell.status = status
    cell.error = error
    cell.finished_at = now()
    if server_cpu_source is not None:
        cell.server_cpu_source = server_cpu_source
    if server_cpu_window is not None:
        cell.server_cpu_window = server_cpu_window
    if build is not None:
        cell.build_id = build.id
    elif build_id is not None:
        cell.build_id = build_id
    if environment is not None:
        cell.environment_id = environment.id
    elif environment_id is not None:
        cell.environment_id = environment_id
    for s in samples or []:
        s.cell_id = cell.id
        session.add(s)
    if profile is not None:
        from runner.store.profiles import save_profile

        save_profile(session, cell_id=cell.id, row=profile)
    if then is not None:
        session.flush()
        then(session, cell)
    refresh_progress(session, campaign_id=cell.campaign_id)  # takes the campaign's row lock
    refresh_points(session, cell=cell)  # after the lock: sees every other finished cell of the group
    session.commit()


def refresh_progress(session: Session, *, campaign_id: int) -> Campaign:
    """Recount the campaign's done/failed/skipped cells and close the campaign when no
    cell is queued or running (``done``, or ``failed`` when every cell failed)."""
    session.flush()
    # Lock the campaign row first: concurrent workers finishing cells then count in turn,
    # so the last one sees every other's committed cell and closes the campaign.
    camp = session.scalars(select(Campaign).where(Campaign.id == campaign_id).with_for_update()
                           .execution_options(populate_existing=True)).one()
    counts = dict(session.execute(select(Cell.status, func.count()).where(Cell.campaign_id == campaign_id)
                                  .group_by(Cell.status)).all())
    camp.cells_done = counts.get("done", 0)
    camp.cells_failed = counts.get("failed", 0)
    camp.cells_skipped = counts.get("skipped", 0)
    open_cells = counts.get("queued", 0) + counts.get("running", 0)
    if open_cells == 0 and camp.status in ("queued", "running", "interrupted"):
        camp.status = "done" if camp.cells_done else "failed"
        camp.finished_at = now()
    return camp


def cancel_campaign(session: Session, *, campaign_id: int) -> Campaign:
    """Cancel a campaign: queued cells become ``cancelled``; a running cell finishes
    (its worker checks the campaign status between cells). Commits. Raises LookupError
    for an unknown id and ValueError for a campaign already finished."""
    camp = session.get(Campaign, campaign_id)
    if camp is None:
        raise LookupError(f"no campaign {campaign_id}")
    if camp.status in ("done", "failed", "cancelled"):
        raise ValueError(f"campaign {campaign_id} is already {camp.status}")
    session.execute(update(Cell).where(Cell.campaign_id == campaign_id, Cell.status == "queued")
                    .values(status="cancelled", finished_at=now()))
    camp.status = "cancelled"
    camp.finished_at = now()
    session.commit()
    return camp


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (``kill(pid, 0)``; one of another user
    counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_dead_workers(session: Session) -> int:
    """Mark cells ``running`` under a worker on THIS host whose process is gone as
    ``failed`` ("interrupted: worker host:pid died"), and their campaigns
    ``interrupted`` (queued cells stay queued so ``xferlab resume`` can finish them).
    Commits. Returns the number of cells reaped."""
    host = socket.gethostname()
    reaped = 0
    for cell in session.scalars(select(Cell).where(Cell.status == "running")).all():
        if not cell.worker or ":" not in cell.worker:
            continue
        h, _, pid = cell.worker.rpartition(":")
        if h != host or not pid.isdigit() or pid_alive(int(pid)):
            continue
        cell.status = "failed"
        cell.error = f"interrupted: worker {cell.worker} died while running this cell"
        cell.finished_at = now()
        camp = session.get(Campaign, cell.campaign_id)
        if camp is not None and camp.status == "running":
            camp.status = "interrupted"
        reaped += 1
    session.flush()
    for camp in session.scalars(select(Campaign).where(Campaign.status == "running")).all():
        # Between two cells a live worker has no running cell: judge by the worker of the
        # cell finished last, and only when it ran on this host.
        running = session.scalar(select(func.count()).where(Cell.campaign_id == camp.id, Cell.status == "running"))
        if running:
            continue
        last = session.scalars(select(Cell).where(Cell.campaign_id == camp.id, Cell.worker.is_not(None))
                               .order_by(Cell.finished_at.desc().nulls_last())).first()
        if last is None or not last.worker:
            continue
        h, _, pid = last.worker.rpartition(":")
        if h == host and pid.isdigit() and not pid_alive(int(pid)):
            camp.status = "interrupted"
    session.flush()
    for camp in session.scalars(select(Campaign).where(Campaign.status == "interrupted")).all():
        refresh_progress(session, campaign_id=camp.id)
    session.commit()
    return reaped
