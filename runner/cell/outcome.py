"""The outcome of one cell and its construction, shared by every cell runner.

A *cell runner* runs one cell (one fresh server, one measured phase) and returns a
:class:`CellOutcome`; ``run_campaign`` (runner.campaign.loop) stores it. Two runners exist:
this machine (:func:`runner.cell.local.run_local_cell`) and across hosts
(:func:`runner.cell.remote.run_remote_cell`). Both turn what they measured into
an outcome here, so the memory figures, the failed-operations reason and the crash
record are written once.
"""
from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from runner.catalogue.workloads import WorkloadParams
from runner.cell.samples import headline, phase_samples
from runner.cell.server_cpu import ServerCpu
from runner.load.result import PhaseResult
from runner.metrics.profile_data import ServerProfile

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.spec.model import CampaignSpec
    from runner.store.models import Cell, Sample

log = logging.getLogger(__name__)

#: Notes of a PhaseResult that explain failed operations (after an optional ``host: `` prefix).
_DETAIL_PREFIXES = ("first ", "phase timeout", "client hosts without a result")


@dataclass
class CellOutcome:
    """What running one cell produced (before it is stored).

    Attributes:
        status: ``done``, ``failed`` or ``skipped``.
        error: the reason for ``failed`` / ``skipped`` (stored as the cell's error), else None.
        result: the measured phase, when there was one.
        samples: unsaved sample rows (runner.cell.samples.phase_samples and extras).
        build_info: what the server ran as (backend's ``build_info``), when it started.
        summary: one-line human summary for the progress display.
        environment: the cell's own environment snapshot (multi-host cells: the hosts
            used); None means the campaign's local snapshot.
        server_cpu_source: where the server CPU figures came from, ``cgroup`` or
            ``tree`` (runner.cell.server_cpu); None when none was measured.
        server_cpu_window: what they span, ``span`` (the measured span) or ``phase``
            (the whole phase; runner.cell.server_cpu.WINDOWS); None when none was measured.
        profile: the server's CPU profile over the measured phase (runner.metrics.profile),
            for a cell whose spec asks for one (runner.spec.profile), stored with the
            samples (runner.store.profiles); None otherwise.
    """

    status: str
    error: str | None = None
    result: PhaseResult | None = None
    samples: list[Sample] = field(default_factory=list)
    build_info: dict[str, Any] | None = None
    summary: str = ""
    environment: dict[str, Any] | None = None
    server_cpu_source: str | None = None
    profile: ServerProfile | None = None
    server_cpu_window: str | None = None


class Reporter(Protocol):
    """Progress sink (the CLI's rich display, the worker's log)."""

    def cell_started(self, cell: Cell, index: int, total: int) -> None: ...

    def cell_finished(self, cell: Cell, status: str, summary: str) -> None: ...

    def message(self, text: str) -> None: ...


class CellRunner(Protocol):
    """Runs one cell end to end; never raises for server, driver or host failures
    (they become a ``failed`` / ``skipped`` outcome naming the cause)."""

    def __call__(self, cell: Cell, spec: CampaignSpec, backend: Backend, *,
                 reporter: Reporter | None = None) -> CellOutcome: ...


def warmup_params(p: WorkloadParams) -> WorkloadParams:
    """Parameters of the short unrecorded warm-up pass: at most 10 clients, 1 MiB
    files, 0.3 s of streaming, one transfer of at most 16 MiB."""
    return p.model_copy(update={"clients": min(p.clients, 10), "file_size": min(p.file_size, 1 << 20),
                                "transfer_size": min(p.transfer_size, 16 << 20),
                                "duration": min(p.duration, 0.3)})


def skipped(reason: str) -> CellOutcome:
    """A skipped cell: ``error`` and ``summary`` are ``"skipped: REASON"``."""
    return CellOutcome("skipped", f"skipped: {reason}", summary=f"skipped: {reason}")


def failed(reason: str, *, build_info: dict[str, Any] | None = None) -> CellOutcome:
    """A failed cell without a measured phase (the server or the load could not run)."""
    return CellOutcome("failed", reason, build_info=build_info, summary=reason)


def crashed(exc: BaseException, cell_id: object = "?") -> CellOutcome:
    """A cell that hit an unexpected exception (a bug): the type, message and the last
    three frames are recorded, so the campaign goes on and the cause stays visible.
    Call from the ``except`` block."""
    log.debug("cell %s crashed", cell_id, exc_info=True)
    tb = traceback.format_exc(limit=3)
    return CellOutcome("failed", f"{type(exc).__name__}: {exc}\n{tb}", summary=f"{type(exc).__name__}: {exc}")


def memory_figures(checkpoints: Mapping[str, tuple[float | None, float | None] | None],
                   peak: tuple[float | None, float | None] | None) -> dict[str, dict[str, float | None]]:
    """The ``memory`` argument of runner.cell.samples.phase_samples from the server tree's
    figures, bytes.

    Args:
        checkpoints: checkpoint name (``start``, ``loaded``, ``end``) -> ``(uss,
            rss_minus_shared)`` taken then (None or a None member: not taken).
        peak: ``(peak uss, peak rss_minus_shared)`` over the phase, or None.
    Returns: ``{"uss": {name: bytes}, "rss_minus_shared": {name: bytes}}``, peak last.
    """
    memory: dict[str, dict[str, float | None]] = {"uss": {}, "rss_minus_shared": {}}
    for name, snap in checkpoints.items():
        if snap is None:
            continue
        for kind, v in zip(("uss", "rss_minus_shared"), snap):
            if v is not None:
                memory[kind][name] = v
    if peak is not None:
        memory["uss"]["peak"], memory["rss_minus_shared"]["peak"] = peak
    return memory


def failure_reason(result: PhaseResult) -> str:
    """Why a phase with failed operations failed: ``"N failed operations (kind=n, ...)"``
    plus the notes naming the first error of each kind, a phase timeout or client hosts
    without a result (notes of a combined multi-host result carry a ``host: `` prefix)."""
    kinds = ", ".join(f"{k}={v}" for k, v in sorted(result.errors.items()))
    reason = f"{result.error_count} failed operations ({kinds})"

    def explains(note: str) -> bool:
        head, sep, rest = note.partition(": ")
        return note.startswith(_DETAIL_PREFIXES) or bool(sep and " " not in head and rest.startswith(_DETAIL_PREFIXES))

    detail = "; ".join(n for n in result.notes if explains(n))
    return reason + (f": {detail}" if detail else "")


def measured(result: PhaseResult, *, build_info: dict[str, Any] | None,
             memory: dict[str, dict[str, float | None]] | None = None,
             server_cpu: ServerCpu | tuple[float, float] | None = None, memory_timeline: list[Any] | None = None,
             cgroup_memory: dict[str, float] | None = None, extra_samples: Sequence[Sample] = (),
             server_alive: bool = True, server_where: str | None = None, exit_reason: str | None = None,
             summary_suffix: str = "", environment: dict[str, Any] | None = None,
             kernel_note: str = "") -> CellOutcome:
    """The outcome of a measured phase: its sample rows (runner.cell.samples.phase_samples,
    then ``extra_samples``), ``done`` when no operation failed, else ``failed`` with
    :func:`failure_reason` and, when the server was not running at the end, ``"; server
    [on WHERE] not running at the end of the cell [(EXIT_REASON)]"``.

    Args are those of phase_samples (memory in bytes, CPU in s), plus the server's
    ``build_info``, whether it was alive at the end, where it ran (multi-host: the
    host name), why it exited when known, a suffix of the one-line summary, the
    cell's own environment snapshot and ``kernel_note``, the sentence of the phase's
    non-zero kernel TCP counters (runner.metrics.tcpstats.format_tcp_counters), added
    to the summary and, for a failed cell, to the reason (``"; kernel: ..."``)."""
    samples = phase_samples(result, memory=memory, server_cpu=server_cpu, memory_timeline=memory_timeline,
                            cgroup_memory=cgroup_memory)
    samples += list(extra_samples)
    summary = headline(result) + summary_suffix + (f"; kernel: {kernel_note}" if kernel_note else "")
    build = dict(build_info) if build_info is not None else None
    source = None if server_cpu is None else server_cpu.source if isinstance(server_cpu, ServerCpu) else "tree"
    window = None if server_cpu is None else server_cpu.window if isinstance(server_cpu, ServerCpu) else "phase"
    if not result.error_count:
        return CellOutcome("done", None, result, samples, build, summary, environment, source,
                           server_cpu_window=window)
    reason = failure_reason(result)
    if kernel_note:
        reason += f"; kernel: {kernel_note}"
    if not server_alive:  # say so when the server died under load
        where = f" on {server_where}" if server_where else ""
        reason += f"; server{where} not running at the end of the cell" + (f" ({exit_reason})" if exit_reason else "")
    return CellOutcome("failed", reason, result, samples, build, summary, environment, source,
                       server_cpu_window=window)
