"""One cell on this machine: the cell runner of campaigns without a ``hosts`` block
(runner.campaign.loop.cell_runner), the kernel TCP counters around its measured phase, and
where its time goes.

Time: every cell records, as samples of metric ``cell_time`` (seconds of wall time),
the stages of :data:`STAGES`; ``xferlab show ID --timing`` sums them over a campaign
(runner.cli.read). ``store`` (writing the cell's outcome to the database) is recorded
by the campaign loop after the write (runner.campaign.loop).
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from runner.backends.base import Backend, ServerFailed, ServerSkipped
from runner.backends.profiling import start_profile, stop_profile
from runner.catalogue.pairing import pair_skip_reason, tls_pair_skip_reason
from runner.catalogue.stages import STAGES
from runner.catalogue.workloads import WorkloadParams
from runner.cell.outcome import (
    CellOutcome,
    Reporter,
    crashed,
    failed,
    measured,
    memory_figures,
    skipped,
    warmup_params,
)
from runner.cell.server_cpu import SpanWatch, phase_cpu
from runner.cell.server_reuse import ServerPool, end_sessions, needs_perf_map
from runner.cell.upload_check import UploadCheck, judge
from runner.cell.watchdog import CellWatchdog
from runner.load.ftp.fixtures import place_phase_fixture
from runner.load.ftp.session import FTPError
from runner.load.registry import DriverUnavailable, LoadError, get_driver
from runner.multihost.inventory import MultiHostError
from runner.multihost.processes import run_client_processes, splits
from runner.spec.model import CampaignSpec, ServerSpec
from runner.store.models import Cell, Sample
from runner.tls.certs import campaign_certificates

log = logging.getLogger(__name__)

class StageClock:
    """Wall time per stage of one cell: ``with clock("start"): ...`` adds the block's
    duration to stage ``start``; :meth:`record` adds a known duration. Seconds.
    ``on_stage`` (optional; the cell watchdog's ``enter``) hears ``STAGE`` when a block
    starts and ``after STAGE`` when it ends."""

    def __init__(self, on_stage: Callable[[str], None] | None = None) -> None:
        self.seconds: dict[str, float] = {}
        self.on_stage = on_stage

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        t = time.perf_counter()
        if self.on_stage is not None:
            self.on_stage(stage)
        try:
            yield
        finally:
            self.record(stage, time.perf_counter() - t)
            if self.on_stage is not None:
                self.on_stage(f"after {stage}")

    def record(self, stage: str, seconds: float) -> None:
        """Add ``seconds`` to ``stage`` (a :data:`STAGES` key; ValueError otherwise)."""
        if stage not in STAGES:
            raise ValueError(f"unknown cell stage {stage!r}; known: {', '.join(STAGES)}")
        self.seconds[stage] = self.seconds.get(stage, 0.0) + max(0.0, seconds)

    def samples(self) -> list[Sample]:
        """One ``cell_time`` sample per stage recorded (stat: the stage, unit ``s``)."""
        return [Sample(metric="cell_time", stat=k, value=v, unit="s") for k, v in self.seconds.items()]

class _TcpWatch:
    """The kernel TCP counters of the server's network namespace over the measured
    phase, and its listen backlogs (runner.metrics.tcpstats), for one cell. Never
    raises: what cannot be read (no /proc, no ``ss``, no permission for ``nsenter``) is
    logged and left out of the cell.

    Under the local backend the server shares the machine's namespace, so the counts
    include the load generator's side of every connection and the machine's other
    traffic: all are stored, only the listen-queue counters are shown
    (docs/methodology.md)."""

    def __init__(self, pid: int | None, facts: dict[str, Any] | None = None) -> None:
        from runner.metrics import tcpstats

        self.backlogs: list[tuple[str, int]] | None = None
        self.counters: tcpstats.PhaseCounters | None = None
        if pid is None:
            return
        if facts is not None and "backlogs" in facts:  # read once per server life
            self.backlogs = facts["backlogs"]
        else:
            try:
                self.backlogs = [(s.local, s.backlog) for s in tcpstats.listen_backlogs(pid)]
            except (tcpstats.TcpStatsError, ValueError, OSError) as exc:
                log.info("listen backlog of pid %s not read: %s", pid, exc)
            if facts is not None and self.backlogs is not None:
                facts["backlogs"] = self.backlogs
        try:
            self.counters = tcpstats.PhaseCounters(pid).__enter__()
        except (tcpstats.TcpStatsError, ValueError, OSError) as exc:
            log.info("TCP counters of pid %s not read: %s", pid, exc)

    def finish(self) -> tuple[list[Any], str]:
        """Read the counters again; return (sample rows, the sentence of the non-zero
        counters with the backlog, e.g. ``"148 listen overflows, ...; backlog 32"``)."""
        from runner.cell.samples import tcp_samples
        from runner.metrics import tcpstats

        if self.counters is None:
            return [], ""
        try:
            self.counters.__exit__(None, None, None)
        except (tcpstats.TcpStatsError, ValueError, OSError) as exc:
            log.info("TCP counters not read after the phase: %s", exc)
            return [], ""
        delta = self.counters.delta
        before = self.counters.before
        samples = tcp_samples(delta, self.backlogs, before.netns if before else "")
        shown = delta
        host_ns = before is not None and bool(before.netns) and before.netns == _own_netns()
        if host_ns:  # the machine's own traffic retransmits too: show what only listeners count
            shown = {k: v for k, v in delta.items() if k in _LISTEN_COUNTERS}
        sentence = tcpstats.format_tcp_counters(shown, [b for _, b in self.backlogs or []])
        if sentence and host_ns:
            sentence += " (host namespace)"
        return samples, sentence


#: Counters shown for a server in the host's namespace (all are stored): those only a
#: listening socket counts, so the machine's other traffic does not show up in them.
_LISTEN_COUNTERS = ("ListenOverflows", "ListenDrops", "TCPReqQFullDrop", "TCPReqQFullDoCookies", "SyncookiesSent")


class _LinkWatch:
    """The qdisc counters of the shaped link a server is reached over (``handle.link``,
    runner.net.link.LinkNet; absent for loopback) over the measured phase. Never
    raises: a reading that fails is logged and the link rows are left out."""

    def __init__(self, handle: Any) -> None:
        self.net = getattr(handle, "link", None)
        self.before: dict[str, Any] | None = None
        if self.net is not None:
            try:
                self.before = self.net.qdiscs()
            except Exception as exc:  # noqa: BLE001 - a missing reading must not fail the cell
                log.info("qdiscs of the link not read before the phase: %s", exc)

    def finish(self) -> tuple[list[Any], str]:
        """(``link_qdisc`` sample rows (runner.cell.samples.link_samples), a note naming the
        qdisc drops of the phase when there were any, else "")."""
        from runner.cell.samples import link_samples
        from runner.net.link import phase_counters

        if self.net is None or self.before is None:
            return [], ""
        try:
            after = self.net.qdiscs()
            counters = phase_counters(self.before, after)
        except Exception as exc:  # noqa: BLE001
            log.info("qdiscs of the link not read after the phase: %s", exc)
            return [], ""
        text = self.net.link.text()
        drops = counters.get("server_drops", 0) + counters.get("client_drops", 0)
        return (link_samples(counters, text, {"before": self.before, "after": after}),
                f"link {text}: {drops} packets dropped by its qdiscs" if drops else "")


def _own_netns() -> str:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return ""



def run_local_cell(cell: Cell, spec: CampaignSpec, backend: Backend, *,
                   reporter: Reporter | None = None, pool: ServerPool | None = None,
                   watch: CellWatchdog | None = None) -> CellOutcome:
    """Run one cell on this machine (a runner.cell.outcome.CellRunner): start the server with
    ``backend``, sample its process tree and read its cgroup's CPU counters
    (runner.cell.server_cpu), warm up, run the measured phase with the
    spec's driver, stop the server. Never raises for server or load failures (they
    become a ``failed``/``skipped`` outcome with the reason).

    With a ``pool`` (runner.cell.server_reuse; the spec's ``server_reuse`` policy), a running
    server that may serve the cell is used instead of a fresh one, and after a ``done``
    cell the server is handed back to the pool instead of stopped. A cell on a reused
    server records no memory figures (memory rows need a fresh server), starts no memory
    sampler process (its process tree's CPU times are read here, before and after the
    phase), reuses the listen backlog read when the server started, and, under the
    ``repeats`` policy, skips the warm-up its group's first repeat ran.

    Where the cell's time went is added to the outcome's samples (metric ``cell_time``,
    one row per :data:`STAGES` entry that ran, seconds of wall time), for ``xferlab
    show ID --timing``.

    ``watch`` (runner.cell.watchdog, when the cell runs under its watchdog) hears the stages
    and the server's handle; the server is stopped here only when the watchdog has not
    claimed its stop, and never kept for reuse once the watchdog fired."""
    clock = StageClock(watch.enter if watch is not None else None)
    outcome = _run_local_cell(cell, spec, backend, reporter, clock, pool, watch)
    if outcome.status != "skipped":
        outcome.samples += clock.samples()
    return outcome


def _run_local_cell(cell: Cell, spec: CampaignSpec, backend: Backend, reporter: Reporter | None,
                    clock: StageClock, pool: ServerPool | None, watch: CellWatchdog | None) -> CellOutcome:
    from runner.metrics.sampler import TreeSampler

    srv = ServerSpec.model_validate(cell.server_spec)
    req = srv.request(spec.max_clients)
    if needs_perf_map(cell):  # Node's --perf-basic-prof (runner.catalogue.servers.JIT_SERVERS)
        req = replace(req, perf_map=True)
    params = WorkloadParams.model_validate(cell.params)
    driver = get_driver(spec.driver_of(params, cell.workload))
    why = pair_skip_reason(srv.name, cell.workload, params) or \
        tls_pair_skip_reason(srv.name, req.variant, cell.workload, driver)
    if why is not None:  # e.g. an FTP workload on an HTTP-only server, nginx and POST, FTPS on Twisted
        return skipped(why)
    if str(req.variant.get("tls", "none")) != "none":  # the campaign's certificates (runner.tls.certs)
        req = replace(req, tls=campaign_certificates(cell.campaign_id, spec.tls_key))
    try:
        with clock("check"):
            driver.check()
            backend.check(req)
    except (ServerSkipped, DriverUnavailable) as exc:
        return skipped(str(exc))
    except ServerFailed as exc:  # e.g. the server's source does not build: a failure, never a skip
        return failed(str(exc))
    handle = None
    sampler = None
    profiler = None
    profile = None
    served = 1  # the cells this server has served, this one included
    facts: dict[str, Any] = {}  # read once per server life (runner.cell.server_reuse.LiveServer)
    keep = False
    try:
        if pool is not None:
            got = pool.take(cell)
            if pool.last_stop_s:  # the previous cell's server, stopped now: its stop is this cell's time
                clock.record("stop", pool.last_stop_s)
            if got is not None:
                handle, served, facts = got.handle, got.cells + 1, got.facts
        if handle is None:
            with clock("start"):
                handle = backend.start(req, cpu=spec.pinning.server)
        if watch is not None:
            watch.watch(handle)
        fresh = served == 1
        build = dict(handle.build_info)
        if fresh and isinstance(build.get("startup_s"), (int, float)):  # of which: the greeting and a login
            clock.record("probe", float(build["startup_s"]))
        start_mem = None
        if handle.pid is not None:
            with clock("sampler"):
                sampler = TreeSampler(handle.pid)
                if fresh:  # the helper process samples memory; a reused server's cell reads CPU times only
                    sampler.start()
                    start_mem = sampler.checkpoint("start")
        def progress(text: str) -> None:
            if reporter is not None:
                reporter.message(text)

        upload = UploadCheck(handle, params) if cell.workload == "http_upload" else None
        if upload is not None and spec.warmup:
            with clock("files"):
                upload.mark()  # the warm-up's uploads are deleted before the phase
        if spec.warmup and (fresh or pool is None or pool.policy != "repeats"):  # repeats: warmed by the first
            try:  # its messages too: the fixtures are usually made here
                with clock("warmup"):
                    driver.run(cell.workload, handle.target, warmup_params(params),
                               progress=lambda text: progress(f"warm-up: {text}"))
            except LoadError as exc:
                raise ServerFailed(f"warm-up failed: {exc}") from exc
        with clock("fixture"):  # before the CPU counters and the sync: an upload is not the phase's
            try:  # (docs/methodology.md, "What server CPU counts")
                place_phase_fixture(cell.workload, handle.target, params)
            except (FTPError, OSError) as exc:  # the phase's own setup meets it again and records it
                log.info("cell %s: fixture not placed before the phase: %s", cell.id, exc)
        with clock("sync"):  # earlier phases' writeback must not land in this one (docs/methodology.md)
            os.sync()
        processes = spec.client_process_count()
        kept = None  # the server life's kept sessions (runner.load.ftp.session_pool), when this row uses them
        run_params = params
        make_pool, fill = getattr(driver, "session_pool", None), getattr(driver, "fill_sessions", None)
        poolable = cell.workload in getattr(driver, "pooled_workloads", ()) \
            and handle.target.tls is None  # FTPS: each row's handshakes are a figure
        if pool is not None and pool.policy != "none" and poolable and make_pool is not None and fill is not None \
                and not splits(cell.workload, params.clients, processes):
            kept = facts.get("sessions")
            if kept is None:
                kept = facts["sessions"] = make_pool(handle.target)
            t_fill = time.perf_counter()
            with clock("sessions"):  # before the server's CPU and TCP counters are read: not part of the phase
                fill(cell.workload, handle.target, params, kept, progress=progress)
            # the logins and the phase share one phase_timeout, as when the phase logged them in
            # (the cell watchdog's bound counts one phase_timeout for both)
            left = params.phase_timeout - (time.perf_counter() - t_fill)
            run_params = params.model_copy(update={"phase_timeout": max(left, 1.0)})
        elif "sessions" in facts:  # a row that keeps none runs without the earlier rows' sessions held open
            with clock("sessions"):
                end_sessions(facts)
        with clock("counters"):
            tcp = _TcpWatch(handle.pid, facts)
            link = _LinkWatch(handle)
        if upload is not None:
            with clock("files"):
                upload.start()
        cg0 = handle.cgroup_cpu()  # the server's cgroup: every process, exited ones too (runner.cell.server_cpu)
        processes = spec.client_process_count()
        split = splits(cell.workload, params.clients, processes)
        # a driver that marks its measured span in this process: CPU and profile over the span
        marks_span = bool(getattr(driver, "measure_events", False)) and not split
        wanted = spec.profile_of(srv, cell.workload, params) if cell.profiled else None
        if wanted is not None:
            with clock("profile"):  # the profiled repeat (runner.spec.model.expand): the profilers record from here
                profiler = start_profile(wanted, srv.name, handle, cg0, span=marks_span)
        cpu0 = sampler.cpu_times() if sampler else None
        span = SpanWatch(handle.cgroup_cpu if cg0 is not None else None,
                         sampler.cpu_times if sampler is not None else None, profiler) if marks_span else None
        snaps: dict[str, Any] = {"start": start_mem}

        def checkpoint(name: str) -> None:
            if span is not None and span.mark(name):
                return
            if sampler is not None and fresh:
                snaps[name] = sampler.checkpoint(name)

        with clock("phase"):
            if split:
                progress(f"{cell.workload}: {params.clients} clients from {processes} client processes")
                # no "loaded" checkpoint: the peak comes from the sampler's timeline
                result, process_rows = run_client_processes(
                    cell.workload, handle.target, params, processes, cpus=spec.pinning.client,
                    driver=spec.driver_of(params, cell.workload))
            else:
                more = {"sessions": kept} if kept is not None else {}
                result = driver.run(cell.workload, handle.target, run_params, checkpoint=checkpoint,
                                    progress=progress, **more)
                process_rows = []
        clock.record("measured", result.elapsed_s)
        cg1 = handle.cgroup_cpu() if cg0 is not None else None
        if profiler is not None:
            with clock("profile"):
                profile = stop_profile(profiler)
        with clock("counters"):
            tcp_rows, kernel_note = tcp.finish()
            link_rows, link_note = link.finish()
        kernel_note = "; ".join(filter(None, (kernel_note, link_note)))
        memory = None
        tree_cpu = None
        timeline = None
        if sampler is not None and cpu0 is not None:
            t_mem = time.perf_counter()
            cpu1 = sampler.cpu_times()
            tree_cpu = (max(0.0, cpu1[0] - cpu0[0]), max(0.0, cpu1[1] - cpu0[1]))
            if fresh and kept is None:  # memory rows need a fresh server (runner.cell.server_reuse); "end" is
                snaps["end"] = sampler.checkpoint("end")  # after the sessions ended: not while they are kept
            sampler.stop()
            if fresh:
                memory = memory_figures({k: (v.uss, v.rss_minus_shared) if v is not None else None
                                         for k, v in snaps.items()},
                                        (sampler.peak_uss, sampler.peak_rss_minus_shared))
                timeline = [list(t) for t in sampler.timeline[-2000:]]
            clock.record("sampler", time.perf_counter() - t_mem)
        if span is not None and span.complete:  # the measured span's counters (runner.cell.server_cpu)
            server_cpu = phase_cpu(span.tree_delta(), span.cgroup_delta(), "span",
                                   whole=cg1.since(cg0) if cg0 is not None and cg1 is not None else None)
        else:
            server_cpu = phase_cpu(tree_cpu, cg1.since(cg0) if cg0 is not None and cg1 is not None else None)
        alive = handle.alive() if result.error_count else True  # asked only when it matters (a probe)
        cg_mem = handle.cgroup_memory() if fresh else None
        if cg_mem and kept is not None:  # "current", "anon": after the sessions ended, which kept ones have not
            cg_mem = {k: v for k, v in cg_mem.items() if k == "peak"}
        outcome = measured(result, build_info=build, memory=memory, server_cpu=server_cpu, memory_timeline=timeline,
                           # docker backend: the container's memory cgroup (current/peak/anon)
                           cgroup_memory=cg_mem, server_alive=alive,
                           exit_reason=None if alive else (handle.exit_reason() or "exited"),
                           extra_samples=tcp_rows + link_rows + process_rows + _kept_samples(kept),
                           kernel_note=kernel_note,
                           summary_suffix=("" if fresh else f" (server reused: cell {served} of its life)")
                           + _kept_summary(kept))
        outcome.profile = profile
        if upload is not None:  # every 2xx upload a file of body_size bytes (seed 002's ls | wc -l)
            with clock("files"):
                judge(outcome, upload, result)
        keep = outcome.status == "done"
        return outcome
    except ServerSkipped as exc:
        return skipped(str(exc))
    except (ServerFailed, LoadError, MultiHostError) as exc:
        reason = str(exc)
        if handle is not None and not handle.alive():  # say so when the server died under load
            reason += f"; server not running ({handle.exit_reason() or 'exited'})"
        return failed(reason, build_info=handle.build_info if handle else None)
    except Exception as exc:  # a bug or an unexpected failure: record it, keep the campaign going
        return crashed(exc, cell.id)
    finally:
        if profiler is not None:
            profiler.close()  # a phase that raised leaves its profilers running
        if sampler is not None:
            try:
                sampler.stop()
            except Exception:  # noqa: BLE001 - cleanup must not mask the outcome
                pass
        expired = watch is not None and watch.expired.is_set()
        kept_server = handle is not None and keep and not expired and pool is not None \
            and pool.keep(cell, handle, served, facts)
        if handle is not None and not kept_server:
            with clock("stop"):
                end_sessions(facts, stopping=True)  # a failed cell's sessions are never reused; none outlive it
                if watch is None or watch.claim_stop():
                    handle.stop()


def _kept_samples(kept: Any) -> list[Sample]:
    """The ``kept_sessions`` rows of a cell whose row kept its sessions (runner.load.ftp.session_pool):
    stat ``reused`` (sessions kept from earlier cells of the server's life, found alive by
    NOOP), ``logged_in`` (logged in before this phase), ``dropped`` (kept ones that did
    not answer and were closed); counts. [] without a pool."""
    if kept is None:
        return []
    return [Sample(metric="kept_sessions", stat=k, value=float(getattr(kept, k)), unit="count")
            for k in ("reused", "logged_in", "dropped")]


def _kept_summary(kept: Any) -> str:
    """``"; sessions: 300 reused, 0 logged in"`` for a cell with kept sessions, else ""."""
    if kept is None:
        return ""
    return f"; sessions: {kept.reused} reused, {kept.logged_in} logged in" + (
        f", {kept.dropped} dead dropped" if kept.dropped else "")
