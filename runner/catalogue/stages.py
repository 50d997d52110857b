"""The stages of a cell: where a cell's wall time goes, recorded as samples of metric
``cell_time`` (seconds) by the cell runners (runner.cell.local) and the campaign loop
(``store``), and summed by ``xferlab show ID --timing`` (runner.report.reader.timing)."""
from __future__ import annotations

#: Stages of a cell, in order, with what each covers. ``probe`` is part of ``start``
#: (the backend's wait for a greeting and a login) and ``measured`` part of ``phase``
#: (the measured span of the driver's run: the rest is its untimed setup and teardown).
#: ``prepare`` is recorded on the first cell a process runs of a campaign.
STAGES: dict[str, str] = {
    "prepare": "the campaign's backend made ready, once, before its first cell (docker: its images built)",
    "check": "driver and backend checks (binary, image present)",
    "start": "server start: process or container, until it answers",
    "probe": "  of which: waiting for the greeting and a login",
    "sampler": "memory sampler start and stop, memory figures",
    "warmup": "unrecorded warm-up pass (fixtures are usually made here)",
    "fixture": "the measured phase's download file placed on the server (runner.load.ftp.fixtures.place_phase_fixture)",
    "sync": "flushing dirty page cache before the phase (sync(2))",
    "sessions": "logging in the sessions a pooled row keeps across a server's life (runner.load.ftp.session_pool)",
    "counters": "kernel TCP counters and listen backlog (ss); a shaped link's qdisc counters (tc)",
    "files": "stored-file check of an HTTP upload cell: listing, deleting (runner.cell.upload_check)",
    "profile": "server profilers (perf, py-spy) start, stop and their output read (runner.metrics.profile)",
    "phase": "the driver's run of the measured workload",
    "measured": "  of which: the measured span",
    "stop": "server stop (process or container removal)",
    "store": "writing the outcome to the database",
}
