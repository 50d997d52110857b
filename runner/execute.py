"""Running campaigns: claim cells, start servers, measure, store each cell as it finishes.

The same loop serves ``xferlab run`` (one campaign, in the foreground) and the
worker (any queued campaign). One cell is one fresh server process: start it, wait
until it answers, sample its process tree's memory, warm up, run the measured
workload, stop it. Samples are committed per cell, so a crash loses at most the
cell in flight.
"""
from __future__ import annotations

import logging
import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from runner.backends.base import Backend, ServerFailed, ServerSkipped
from runner.load.result import PhaseResult
from runner.load.workloads import WorkloadParams
from runner.measure import headline, phase_samples
from runner.spec import CampaignSpec, ServerSpec
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell

log = logging.getLogger(__name__)


class Reporter(Protocol):
    """Progress sink (the CLI's rich display, the worker's log)."""

    def cell_started(self, cell: Cell, index: int, total: int) -> None: ...

    def cell_finished(self, cell: Cell, status: str, summary: str) -> None: ...

    def message(self, text: str) -> None: ...


class LogReporter:
    """Reporter that writes to the ``logging`` module."""

    def cell_started(self, cell: Cell, index: int, total: int) -> None:
        log.info("[%d/%d] %s %s repeat %d", index, total, cell.server_label, cell.workload, cell.repeat + 1)

    def cell_finished(self, cell: Cell, status: str, summary: str) -> None:
        log.info("  %s: %s", status, summary)

    def message(self, text: str) -> None:
        log.info("%s", text)


@dataclass
class CellOutcome:
    """What running one cell produced (before it is stored)."""

    status: str  # done | failed | skipped
    error: str | None = None
    result: PhaseResult | None = None
    samples: list = field(default_factory=list)
    build_info: dict[str, Any] | None = None
    summary: str = ""
    environment: dict[str, Any] | None = None  # set by runner.multihost: the cell's own hosts


def resolve_backend(name: str) -> Backend:
    """The backend object for a spec's ``backend``: ``auto`` = docker when an engine
    answers and its base image exists or can be bootstrapped (root + debootstrap),
    else local (DESIGN.md "Defaults"). Raises ValueError for an unknown name."""
    from runner.backends import get_backend

    if name == "auto":
        try:
            backend = get_backend("docker")
        except (ValueError, ImportError, RuntimeError):
            return get_backend("local")
        from runner import images

        if not images.image_exists(backend.client, images.BASE_TAG) and not images.can_bootstrap():
            log.warning("docker engine answers but %s is missing and cannot be bootstrapped here "
                        "(needs root and debootstrap): using the local backend", images.BASE_TAG)
            return get_backend("local")
        return backend
    return get_backend(name)


def warmup_params(p: WorkloadParams) -> WorkloadParams:
    """Parameters of the short unrecorded warm-up pass: at most 10 clients, 1 MiB
    files, 0.3 s of streaming, one transfer of at most 16 MiB."""
    return p.model_copy(update={"clients": min(p.clients, 10), "file_size": min(p.file_size, 1 << 20),
                                "transfer_size": min(p.transfer_size, 16 << 20),
                                "duration": min(p.duration, 0.3)})


def run_cell(cell: Cell, spec: CampaignSpec, backend: Backend, *, reporter: Reporter | None = None) -> CellOutcome:
    """Run one cell end to end and return its outcome; never raises for server or
    load failures (they become a ``failed``/``skipped`` outcome with the reason)."""
    from runner.load.run import LoadError, run_workload_sync
    from runner.metrics.sampler import TreeSampler

    if spec.hosts is not None:  # server and load generators on other hosts
        from runner.multihost import run_cell as run_multihost_cell

        return run_multihost_cell(cell, spec, reporter=reporter)
    srv = ServerSpec.model_validate(cell.server_spec)
    req = srv.request(spec.max_clients)
    params = WorkloadParams.model_validate(cell.params)
    try:
        backend.check(req)
    except ServerSkipped as exc:
        return CellOutcome("skipped", f"skipped: {exc}", summary=f"skipped: {exc}")
    handle = None
    sampler = None
    try:
        handle = backend.start(req, cpu=spec.pinning.server)
        build = dict(handle.build_info)
        if handle.pid is not None:
            sampler = TreeSampler(handle.pid)
            sampler.start()
            start_mem = sampler.checkpoint("start")
        else:
            start_mem = None
        if spec.warmup:
            try:
                run_workload_sync(cell.workload, handle.target, warmup_params(params))
            except LoadError as exc:
                raise ServerFailed(f"warm-up failed: {exc}") from exc
        cpu0 = sampler.cpu_times() if sampler else None
        snaps: dict[str, Any] = {"start": start_mem}

        def checkpoint(name: str) -> None:
            if sampler is not None:
                snaps[name] = sampler.checkpoint(name)

        def progress(text: str) -> None:
            if reporter is not None:
                reporter.message(text)

        result = run_workload_sync(cell.workload, handle.target, params, checkpoint=checkpoint, progress=progress)
        memory = None
        server_cpu = None
        timeline = None
        if sampler is not None:
            cpu1 = sampler.cpu_times()
            server_cpu = (max(0.0, cpu1[0] - cpu0[0]), max(0.0, cpu1[1] - cpu0[1]))
            snaps["end"] = sampler.checkpoint("end")
            sampler.stop()
            memory = {"uss": {}, "rss_minus_shared": {}}
            for name, snap in snaps.items():
                if snap is not None:
                    memory["uss"][name] = snap.uss
                    memory["rss_minus_shared"][name] = snap.rss_minus_shared
            memory["uss"]["peak"] = sampler.peak_uss
            memory["rss_minus_shared"]["peak"] = sampler.peak_rss_minus_shared
            timeline = [list(t) for t in sampler.timeline[-2000:]]
        # docker backend: the container's memory cgroup (current/peak/anon), beside the tree's figures
        cgroup_mem = handle.cgroup_memory() if hasattr(handle, "cgroup_memory") else None
        samples = phase_samples(result, memory=memory, server_cpu=server_cpu, memory_timeline=timeline,
                                cgroup_memory=cgroup_mem)
        summary = headline(result)
        if result.error_count:
            kinds = ", ".join(f"{k}={v}" for k, v in sorted(result.errors.items()))
            reason = f"{result.error_count} failed operations ({kinds})"
            detail = "; ".join(n for n in result.notes if n.startswith(("first ", "phase timeout")))
            if detail:
                reason += f": {detail}"
            if not handle.alive():  # say so when the server died under load
                why = handle.exit_reason() if hasattr(handle, "exit_reason") else None
                reason += f"; server not running at the end of the cell ({why or 'exited'})"
            return CellOutcome("failed", reason, result, samples, build, summary)
        return CellOutcome("done", None, result, samples, build, summary)
    except ServerSkipped as exc:
        return CellOutcome("skipped", f"skipped: {exc}", summary=f"skipped: {exc}")
    except (ServerFailed, LoadError) as exc:
        reason = str(exc)
        if handle is not None and not handle.alive():  # say so when the server died under load
            why = handle.exit_reason() if hasattr(handle, "exit_reason") else None
            reason += f"; server not running ({why or 'exited'})"
        return CellOutcome("failed", reason, build_info=handle.build_info if handle else None, summary=reason)
    except Exception as exc:  # a bug or an unexpected failure: record it, keep the campaign going
        log.debug("cell %s crashed", cell.id, exc_info=True)
        tb = traceback.format_exc(limit=3)
        return CellOutcome("failed", f"{type(exc).__name__}: {exc}\n{tb}", summary=f"{type(exc).__name__}: {exc}")
    finally:
        if sampler is not None:
            try:
                sampler.stop()
            except Exception:  # noqa: BLE001 - cleanup must not mask the outcome
                pass
        if handle is not None:
            handle.stop()


def _environment(spec: CampaignSpec, backend: Backend) -> tuple[dict[str, Any], str]:
    from runner.metrics.environment import environment_class, snapshot

    snap = snapshot({"backend": backend.name, "pinning": spec.pinning.model_dump()})
    return snap, environment_class(snap)


def run_campaign(engine: Engine, campaign_id: int | None = None, *, reporter: Reporter | None = None,
                 max_cells: int | None = None, stop_when_idle: bool = True) -> int:
    """Claim and run queued cells (of ``campaign_id``, or of any campaign) until none
    is left or ``max_cells`` ran. Between cells a cancelled campaign is noticed and
    its cells are no longer claimed. Returns the number of cells run.

    Client CPU pinning (spec.pinning.client) is applied to this process."""
    reporter = reporter or LogReporter()
    factory = sessionmaker(engine, expire_on_commit=False)
    ran = 0
    skipped_servers: dict[tuple[int, str], str] = {}
    env_cache: dict[tuple[int, str], Any] = {}
    specs: dict[int, tuple[CampaignSpec, Backend]] = {}
    orig_affinity = os.sched_getaffinity(0)
    try:
        while max_cells is None or ran < max_cells:
            with factory() as session:
                cell = crud.claim_next_cell(session, campaign_id=campaign_id)
                if cell is None:
                    if stop_when_idle:
                        break
                    time.sleep(1.0)
                    continue
                camp = session.get(Campaign, cell.campaign_id)
                assert camp is not None
                if camp.id not in specs:
                    specs[camp.id] = (CampaignSpec.model_validate(camp.spec), resolve_backend(camp.backend))
                spec, backend = specs[camp.id]
                if spec.pinning.client:
                    os.sched_setaffinity(0, spec.pinning.client)
                index = cell.seq + 1
                reporter.cell_started(cell, index, camp.cells_total)
                key = (camp.id, cell.server_label)
                if key in skipped_servers:
                    outcome = CellOutcome("skipped", skipped_servers[key], summary=skipped_servers[key])
                else:
                    outcome = run_cell(cell, spec, backend, reporter=reporter)
                    if outcome.status == "skipped":
                        skipped_servers[key] = outcome.error or "skipped"
                _store(session, cell, outcome, spec, backend, env_cache)
                reporter.cell_finished(cell, outcome.status, outcome.summary)
                ran += 1
    finally:
        os.sched_setaffinity(0, orig_affinity)
    return ran


def _store(session: Session, cell: Cell, outcome: CellOutcome, spec: CampaignSpec, backend: Backend,
           env_cache: dict) -> None:
    build = crud.get_or_create_build(session, info=outcome.build_info) if outcome.build_info else None
    env = None
    if outcome.status != "skipped" and outcome.environment is not None:
        from runner.metrics.environment import environment_class

        env = crud.get_or_create_environment(session, data=outcome.environment,
                                             env_class=environment_class(outcome.environment))
    elif outcome.status != "skipped":
        key = (cell.campaign_id, backend.name)
        if key not in env_cache:
            env_cache[key] = _environment(spec, backend)
        data, cls = env_cache[key]
        env = crud.get_or_create_environment(session, data=data, env_class=cls)
    # Re-read the cell in this session (it was claimed and committed in the same session).
    current = session.scalars(select(Cell).where(Cell.id == cell.id)).one()
    crud.finish_cell(session, cell=current, status=outcome.status, error=outcome.error, samples=outcome.samples,
                     build=build, environment=env)
