"""Running campaigns: claim cells, start servers, measure, store each cell as it finishes.

The same loop serves ``xferlab run`` (one campaign, in the foreground) and the
worker (any queued campaign). One cell is one fresh server process: start it, wait
until it answers, sample its process tree's memory, warm up, run the measured
workload, stop it. Samples are committed per cell, so a crash loses at most the
cell in flight. Each cell runs under its watchdog (runner.cell.watchdog): past its overall
bound the cell is failed naming the stage that hung, its server stopped, and the loop
goes on to the next cell.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from runner.backends.base import Backend
from runner.catalogue.workloads import WorkloadParams
from runner.cell.local import run_local_cell
from runner.cell.outcome import CellOutcome, CellRunner, Reporter, failed, warmup_params
from runner.cell.profile_rows import profile_row
from runner.cell.server_reuse import ServerPool
from runner.cell.watchdog import CellWatchdog, cell_bound_s
from runner.config import get_settings
from runner.load.registry import driver_record
from runner.spec.model import CampaignSpec, secret_values
from runner.spec.redaction import LOG_FILTER, scrub, scrub_data
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell, Sample
from runner.store.retry import store_retry

log = logging.getLogger(__name__)


__all__ = ["CellOutcome", "Heartbeat", "LogReporter", "Reporter", "cell_runner", "resolve_backend", "run_campaign",
           "run_local_cell", "warmup_params"]


class LogReporter:
    """Reporter (runner.cell.outcome.Reporter) that writes to the ``logging`` module."""

    def cell_started(self, cell: Cell, index: int, total: int) -> None:
        log.info("[%d/%d] %s %s repeat %d", index, total, cell.server_label, cell.workload, cell.repeat + 1)

    def cell_finished(self, cell: Cell, status: str, summary: str) -> None:
        log.info("  %s: %s", status, summary)

    def message(self, text: str) -> None:
        log.info("%s", text)


class ScrubbingReporter:
    """Reporter (runner.cell.outcome.Reporter) that passes every line on to ``inner`` scrubbed of
    ``secrets`` and of URL passwords (runner.spec.redaction.scrub): a campaign's progress
    lines never show its secrets, whatever the display."""

    def __init__(self, inner: Reporter, secrets: frozenset[str]):
        self.inner = inner
        self.secrets = secrets

    def cell_started(self, cell: Cell, index: int, total: int) -> None:
        """As ``inner`` (the cell's label and workload hold no secret)."""
        self.inner.cell_started(cell, index, total)

    def cell_finished(self, cell: Cell, status: str, summary: str) -> None:
        """``inner.cell_finished`` with the summary scrubbed."""
        self.inner.cell_finished(cell, status, scrub(summary, self.secrets) or "")

    def message(self, text: str) -> None:
        """``inner.message`` of the scrubbed text."""
        self.inner.message(scrub(text, self.secrets) or "")


def scrubbed_outcome(outcome: CellOutcome, secrets: frozenset[str]) -> CellOutcome:
    """``outcome`` with its error, summary, build info, environment snapshot and profile notes
    scrubbed of ``secrets`` and of URL passwords (runner.spec.redaction.scrub_data), as stored
    and shown; samples, the measured result and the profile's stacks are unchanged."""
    from dataclasses import replace

    profile = outcome.profile
    if profile is not None and profile.notes:
        profile = replace(profile, notes=tuple(scrub(n, secrets) or "" for n in profile.notes))
    return replace(outcome, error=scrub(outcome.error, secrets), summary=scrub(outcome.summary, secrets) or "",
                   build_info=scrub_data(outcome.build_info, secrets),
                   environment=scrub_data(outcome.environment, secrets), profile=profile)


class Heartbeat:
    """Keeps quiet output alive: a daemon thread that calls ``write`` with one line,
    ``still running: ACTIVITY for 1m05s (last: DETAIL)``, whenever nothing was written
    for ``interval`` seconds, so a CI log or ``| tee`` shows that a long image build or
    a long cell is progressing.

    The owner calls :meth:`activity` when a new thing starts (a cell, an image build),
    :meth:`wrote` after each line it writes itself (with the line as ``detail``). Use as
    a context manager (or :meth:`start` / :meth:`stop`). Raises ValueError for an
    ``interval`` that is not positive."""

    def __init__(self, write: Callable[[str], None], interval: float):
        if not interval > 0:
            raise ValueError(f"heartbeat interval must be > 0 seconds, got {interval!r}")
        self.write = write
        self.interval = float(interval)
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._what = "starting"
        self._since = self._last
        self._detail = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def activity(self, what: str) -> None:
        """A new thing is running from now on (its duration counts from here)."""
        with self._lock:
            self._what, self._since, self._detail = what, time.monotonic(), ""

    def wrote(self, detail: str | None = None) -> None:
        """A line was just written (the quiet time restarts); ``detail`` is shown as ``last:``."""
        with self._lock:
            self._last = time.monotonic()
            if detail is not None:
                self._detail = detail

    def _loop(self) -> None:
        tick = min(1.0, self.interval / 4)
        while not self._stop.wait(tick):
            with self._lock:
                now = time.monotonic()
                if now - self._last < self.interval:
                    continue
                took = int(now - self._since)
                line = (f"still running: {self._what} for {took // 60}m{took % 60:02d}s"
                        + (f" (last: {self._detail[:100]})" if self._detail else ""))
                self._last = now
            self.write(line)

    def start(self) -> Heartbeat:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="xferlab-heartbeat", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (waits at most one tick)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def resolve_backend(name: str, **kwargs: Any) -> Backend:
    """The backend object for a spec's ``backend``: ``auto`` = docker when an engine
    answers and its base image exists or can be bootstrapped (root + debootstrap),
    else local (DESIGN.md "Defaults"). ``kwargs`` go to the backend's constructor
    (``progress=``: one-line messages of image builds, fetches, venvs). Raises
    ValueError for an unknown name."""
    from runner.backends import get_backend

    if name == "auto":
        try:
            backend = get_backend("docker", **kwargs)
        except (ValueError, ImportError, RuntimeError) as exc:  # said, so a run never moves silently
            log.warning("no docker engine usable here (%s): using the local backend", str(exc).splitlines()[0][:200])
            return get_backend("local", **kwargs)
        from runner.backends.docker import DockerBackend, images

        assert isinstance(backend, DockerBackend)
        if not images.image_exists(backend.client, images.BASE_TAG) and not images.can_bootstrap():
            log.warning("docker engine answers but %s is missing and cannot be bootstrapped here "
                        "(needs root and debootstrap): using the local backend", images.BASE_TAG)
            return get_backend("local", **kwargs)
        return backend
    return get_backend(name, **kwargs)


def cell_runner(spec: CampaignSpec) -> CellRunner:
    """The cell runner for ``spec``: across hosts (runner.multihost) when it has a
    ``hosts`` block, else this machine (:func:`run_local_cell`)."""
    if spec.hosts is not None:
        from runner.cell.remote import run_remote_cell

        return run_remote_cell
    return run_local_cell


def _environment(spec: CampaignSpec, backend: Backend, driver: str) -> tuple[dict[str, Any], str]:
    from runner.metrics.environment import environment_class, snapshot

    extra = {"backend": backend.name, "pinning": spec.pinning.model_dump(), "driver": driver_record(driver)}
    network = getattr(backend, "network", None)
    if network:  # docker: netns, bridge or host (a variant may override it per server)
        extra["docker_network"] = network
    if spec.server_reuse != "none":  # a methodology of its own: history cuts there (runner.cell.server_reuse)
        extra["server_reuse"] = spec.server_reuse
    snap = snapshot(extra)
    return snap, environment_class(snap)


def run_campaign(engine: Engine, campaign_id: int | None = None, *, reporter: Reporter | None = None,
                 max_cells: int | None = None, stop_when_idle: bool = True) -> int:
    """Claim and run queued cells (of ``campaign_id``, or of any campaign) until none
    is left or ``max_cells`` ran. Between cells a cancelled campaign is noticed and
    its cells are no longer claimed. Returns the number of cells run.

    Client CPU pinning (spec.pinning.client) is applied to this process. Under a
    spec's ``server_reuse`` policy (runner.cell.server_reuse) a server is kept running
    between the cells it may serve, and the next cell claimed is one of those when
    any is queued; a kept server is stopped when no cell can use it, when the loop
    waits idle and when it ends."""
    reporter = reporter or LogReporter()
    factory = sessionmaker(engine, expire_on_commit=False)
    ran = 0
    skipped_servers: dict[tuple[int, str], str] = {}
    env_cache: dict[tuple[int, str, str], Any] = {}
    records = crud.RecordCache()  # build and environment row ids, looked up once per server start
    specs: dict[int, tuple[CampaignSpec, Backend]] = {}
    secrets: dict[int, frozenset[str]] = {}  # campaign id -> its spec's secrets (runner.spec.redaction)
    orig_affinity = os.sched_getaffinity(0)
    pool = ServerPool("none")
    try:
        while max_cells is None or ran < max_cells:
            with factory() as session:
                cell = store_retry(session, partial(crud.claim_next_cell, session, campaign_id=campaign_id,
                                                    prefer=pool.prefer()),
                                   "claiming a cell", reporter)
                if cell is None:
                    pool.close()
                    if stop_when_idle:
                        break
                    time.sleep(1.0)
                    continue
                camp = store_retry(session, partial(session.get, Campaign, cell.campaign_id),
                                   "reading the campaign", reporter)
                assert camp is not None
                prepare_s = None
                if camp.id not in specs:
                    secrets[camp.id] = secret_values(camp.spec)
                    LOG_FILTER.add(secrets[camp.id])  # the worker's log handlers (runner.campaign.worker)
                    t_prepare = time.perf_counter()
                    specs[camp.id] = _campaign_backend(camp, ScrubbingReporter(reporter, secrets[camp.id]))
                    prepare_s = time.perf_counter() - t_prepare  # this cell's time: a stage of its own
                spec, backend = specs[camp.id]
                cell_reporter = ScrubbingReporter(reporter, secrets[camp.id])
                if pool.policy != spec.server_reuse:
                    pool.close()
                    pool = ServerPool(spec.server_reuse)
                if spec.pinning.client:
                    os.sched_setaffinity(0, spec.pinning.client)
                # the cell's place in the order they run (under server reuse that is not seq)
                index = store_retry(session, partial(_claimed_count, session, camp.id), "counting cells", reporter)
                cell_reporter.cell_started(cell, index, camp.cells_total)
                key = (camp.id, cell.server_label)
                if key in skipped_servers:
                    outcome = CellOutcome("skipped", skipped_servers[key], summary=skipped_servers[key])
                elif spec.hosts is None:
                    watch = _watchdog(cell, backend)
                    outcome = watch.run(
                        partial(run_local_cell, cell, spec, backend, reporter=cell_reporter, pool=pool, watch=watch),
                        partial(_expired, watch))
                else:
                    watch = _watchdog(cell, backend)
                    outcome = watch.run(partial(cell_runner(spec), cell, spec, backend, reporter=cell_reporter),
                                        partial(_expired, watch))
                outcome = scrubbed_outcome(outcome, secrets[camp.id])  # before it is stored or shown
                if prepare_s is not None and outcome.status != "skipped":
                    outcome.samples.append(Sample(metric="cell_time", stat="prepare", value=prepare_s, unit="s"))
                if spec.hosts is not None and outcome.status == "skipped":
                    skipped_servers[key] = outcome.error or "skipped"
                t_store = time.perf_counter()
                more = store_retry(session, partial(_store, session, cell, outcome, spec, backend, env_cache, records),
                                   f"storing cell {cell.id}", cell_reporter)
                if outcome.status != "skipped":  # where the cell's time went: the write too
                    store_retry(session, partial(_store_time, session, cell.id, time.perf_counter() - t_store),
                                f"storing cell {cell.id}", cell_reporter)
                cell_reporter.cell_finished(cell, outcome.status, outcome.summary)
                if more:
                    cell_reporter.message(more)
                ran += 1
    finally:
        pool.close()
        os.sched_setaffinity(0, orig_affinity)
    return ran


def _watchdog(cell: Cell, backend: Backend) -> CellWatchdog:
    """The watchdog of ``cell`` (runner.cell.watchdog): its bound from the cell's
    ``phase_timeout``, the backend's ``ready_timeout``, its fixture sizes and
    ``Settings.cell_allowance``."""
    p = WorkloadParams.model_validate(cell.params)
    ready = getattr(backend, "ready_timeout", None)
    allowance = get_settings().cell_allowance
    bound = cell_bound_s(p.phase_timeout, ready, allowance, p.file_size + p.transfer_size)
    explain = ((f"ready_timeout {ready:g} s + " if ready else "") + f"warm-up and phase 2 x {p.phase_timeout:g} s"
               f" + fixtures + allowance {allowance:g} s")
    return CellWatchdog(bound, explain)


def _expired(watch: CellWatchdog, reason: str) -> CellOutcome:
    """The failed outcome of a cell whose watchdog fired."""
    handle = watch.handle
    return failed(reason, build_info=dict(handle.build_info) if handle is not None else None)


def _campaign_backend(camp: Campaign, reporter: Reporter) -> tuple[CampaignSpec, Backend]:
    """The spec and backend of ``camp``, the backend's progress going to ``reporter``;
    before the first cell, a backend that can (``prepare``: docker builds its images)
    makes what every server of a local campaign needs, saying how far it is."""
    spec = CampaignSpec.model_validate(camp.spec)
    backend = resolve_backend(camp.backend, progress=reporter.message)
    prepare = getattr(backend, "prepare", None)
    if prepare is not None and spec.hosts is None:
        prepare([srv.request(spec.max_clients) for srv in spec.servers])
    return spec, backend


def _claimed_count(session: Session, campaign_id: int) -> int:
    """Cells of the campaign claimed so far (running or finished), the one just claimed included."""
    from sqlalchemy import func

    return int(session.scalar(select(func.count()).select_from(Cell).where(
        Cell.campaign_id == campaign_id, Cell.status != "queued")) or 0)


def _store_time(session: Session, cell_id: int, seconds: float) -> None:
    """Add the ``cell_time``/``store`` sample (runner.catalogue.stages.STAGES) and commit."""
    session.add(Sample(cell_id=cell_id, metric="cell_time", stat="store", value=seconds, unit="s"))
    session.commit()


def _store(session: Session, cell: Cell, outcome: CellOutcome, spec: CampaignSpec, backend: Backend,
           env_cache: dict, records: crud.RecordCache) -> str | None:
    """Store ``outcome`` for ``cell`` (and, with adaptive repeats, queue another repeat of
    its group when needed; for a capacity search's step, its next step: runner.campaign.capacity).
    Returns the message saying what was queued, or None.

    The environment snapshot is taken once per (campaign, backend, driver) (``env_cache``)
    and its row and the cell's build row are looked up once per server start and campaign
    (``records``, runner.store.campaigns.RecordCache), not once per cell."""
    records.rolled_back()  # what a failed earlier attempt read is not in the store
    build_id = records.build_id(session, outcome.build_info) if outcome.build_info else None
    env_id = None
    if outcome.status != "skipped" and outcome.environment is not None:
        from runner.metrics.environment import environment_class

        env_id = records.environment_id(session, outcome.environment, environment_class(outcome.environment))
    elif outcome.status != "skipped":
        # a workload may name its own driver; with none, its protocol's default
        driver = spec.driver_of(WorkloadParams.model_validate(cell.params), cell.workload)
        key = (cell.campaign_id, backend.name, driver)
        if key not in env_cache:
            env_cache[key] = _environment(spec, backend, driver)
        data, cls = env_cache[key]
        env_id = records.environment_id(session, data, cls)
    # Re-read the cell in this session (it was claimed and committed in the same session).
    current = session.scalars(select(Cell).where(Cell.id == cell.id)).one()
    then = None
    note: list[str] = []
    capacity = any(w.capacity is not None for w in spec.workloads)
    if spec.max_repeats or capacity:
        from runner.campaign.capacity import after_step, entry_of
        from runner.campaign.repeats import add_repeat_if_needed, group_values, steadiness

        def then(s: Session, c: Cell) -> None:
            if capacity and not c.profiled and entry_of(spec, c) is not None:  # the search decides what runs next
                said = after_step(s, c, spec)
                if said is not None:
                    note.append(said)
                return
            new = add_repeat_if_needed(s, c, spec)
            if new is not None:
                note.append(f"{c.server_label} · {c.workload}: 95% CI {steadiness(group_values(s, c))} of the "
                            f"median, wanted +-{spec.target_ci * 100:g}%: repeat {new.repeat + 1} queued")
    profile = profile_row(outcome.profile) if outcome.profile is not None and outcome.status != "skipped" else None
    crud.finish_cell(session, cell=current, status=outcome.status, error=outcome.error, samples=outcome.samples,
                     build_id=build_id, environment_id=env_id, then=then,
                     server_cpu_source=outcome.server_cpu_source, server_cpu_window=outcome.server_cpu_window,
                     profile=profile)
    records.committed()
    return note[-1] if note else None
