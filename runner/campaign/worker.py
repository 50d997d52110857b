"""The worker: claims queued cells of any campaign and runs them (``xferlab worker``).

The dashboard and the API only queue campaigns; one or more workers (the compose
``worker`` service) claim their cells with ``SELECT ... FOR UPDATE SKIP LOCKED``
(:func:`runner.store.campaigns.claim_next_cell`), so two workers never run the same
cell. Loop: reap cells of dead workers on this host, run queued cells until none is
left, sleep ``--poll`` seconds, repeat. SIGTERM or SIGINT stop the worker after the
cell in flight is stored (a second signal stops it at once; the cell is then reaped
as ``failed`` by the next worker start).

When no cell is queued, the worker claims a queued bisect (the dashboard's bisect form:
runner.campaign.bisect_job) and runs it to its end, each step a campaign it owns; a stop
requested meanwhile ends it after the cell in flight (the bisect is then ``failed``), and so
does a cancel of the bisect (runner.campaign.bisect_job.cancel: it stays ``cancelled``).
"""
from __future__ import annotations

import argparse
import logging
import signal
import threading

log = logging.getLogger("xferlab.worker")


class _Stop(Exception):
    """Raised between two cells when a stop was requested."""


class WorkerReporter:
    """Reporter (runner.campaign.loop.Reporter) that logs progress and ends the run between
    two cells once ``stop`` is set (the finished cell is already committed then)."""

    def __init__(self, stop: threading.Event):
        self.stop = stop

    def cell_started(self, cell, index: int, total: int) -> None:
        """Log ``campaign N [i/total] server workload repeat r``."""
        log.info("campaign %d [%d/%d] %s %s repeat %d", cell.campaign_id, index, total, cell.server_label,
                 cell.workload, cell.repeat + 1)

    def cell_finished(self, cell, status: str, summary: str) -> None:
        """Log the outcome; raise _Stop if a stop was requested."""
        log.info("campaign %d cell %d %s: %s", cell.campaign_id, cell.seq, status, summary)
        if self.stop.is_set():
            raise _Stop()

    def message(self, text: str) -> None:
        """Log a progress message (image builds, fixtures, heartbeats) at info level, so
        the worker's log shows what it is doing before and between cells."""
        log.info("%s", text)


def main(args: argparse.Namespace) -> int:
    """Run the worker loop.

    Args:
        args: ``once`` (bool: exit when no queued cell is left) and ``poll`` (float:
            seconds between polls when idle, >= 0.05). Optional ``max_polls`` (int) bounds
            the number of idle polls (tests).

    Log lines (this module's and every other logger's that reach the root handlers) are
    scrubbed of the secrets of the campaigns run (runner.spec.redaction.install_log_filter).

    Returns 0 on a clean exit (idle with ``--once``, or stopped by SIGTERM/SIGINT).
    Raises runner.store.db.DatabaseError when the database cannot be reached.
    """
    from runner.campaign import bisect_job
    from runner.campaign.loop import run_campaign
    from runner.store import campaigns as crud
    from runner.store.db import get_engine, session_scope

    if not logging.getLogger().handlers or logging.getLogger().level > logging.INFO:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                            force=True)
    log.setLevel(logging.INFO)
    from runner.spec.redaction import install_log_filter

    install_log_filter()  # every campaign's secrets and URL passwords are scrubbed from the log
    stop = threading.Event()
    signals = 0

    def on_signal(signum, frame):  # noqa: ARG001 - signal handler signature
        nonlocal signals
        signals += 1
        stop.set()
        log.info("signal %d: stopping after the cell in flight", signum)
        if signals > 1:
            raise KeyboardInterrupt

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    poll = max(0.05, float(getattr(args, "poll", 2.0) or 2.0))
    once = bool(getattr(args, "once", False))
    max_polls = getattr(args, "max_polls", None)
    engine = get_engine()
    log.info("worker %s started (poll %.2fs%s)", crud.worker_id(), poll, ", once" if once else "")
    polls = 0
    try:
        while not stop.is_set():
            with session_scope(engine) as session:
                reaped = crud.reap_dead_workers(session)
                reaped_bisects = bisect_job.reap_dead_bisects(session, crud.worker_id().rpartition(":")[0])
            if reaped or reaped_bisects:
                log.info("reaped %d cell(s) and %d bisect(s) of dead workers", reaped, reaped_bisects)
            try:
                ran = run_campaign(engine, None, reporter=WorkerReporter(stop), stop_when_idle=True)
            except _Stop:
                break
            if ran:
                log.info("ran %d cell(s); queue empty", ran)
            with session_scope(engine) as session:
                job = bisect_job.claim_next(session, crud.worker_id())
            if job is not None:
                log.info("bisect %d claimed", job)
                try:
                    status = bisect_job.run_job(engine, job, WorkerReporter(stop))
                except _Stop:
                    with session_scope(engine) as session:
                        bisect_job.stop_job(session, job, "the worker was stopped; the finished steps are "
                                                          "stored campaigns")
                    break
                except Exception as exc:  # noqa: BLE001 - the row records it, the worker goes on
                    log.exception("bisect %d failed", job)
                    with session_scope(engine) as session:
                        bisect_job.stop_job(session, job, f"the worker failed: {type(exc).__name__}: {exc}")
                    continue
                log.info("bisect %d %s", job, status)
                continue
            if once:
                break
            polls += 1
            if max_polls is not None and polls >= max_polls:
                break
            stop.wait(poll)
    except KeyboardInterrupt:
        log.info("interrupted")
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    log.info("worker %s stopped", crud.worker_id())
    return 0
