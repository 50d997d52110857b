"""The stored-file check of an ``http_upload`` cell (seed 002 checked ``ls | wc -l``):
every upload the server answered with a 2xx must be a file of ``body_size`` bytes in
``<home>/uploads`` afterwards.

The folder is listed before and after the measured phase (a reused server,
runner.cell.server_reuse, already holds the files of its earlier cells); the files new after
the phase are the phase's. With ``successful`` the phase's 2xx uploads and ``slack``
the uploads that may have been stored without being counted (see :func:`slack`), the
check passes when

* at least ``successful`` new files have ``body_size`` bytes, and
* at most ``successful + slack`` files are new (of any size), of which at most ``slack``
  have another size (an upload cut short by a lost connection).

With xferlab-http and no failed request, ``slack`` is 0: the counts must be equal.
A mismatch makes the cell ``failed`` with a reason naming both numbers. The counts are
stored as samples of metric ``stored_files`` (stats ``before``, ``new``,
``new_right_size``, ``expected``, ``slack``; unit ``count``). After the check the new
files are deleted, so a reused server or a home in memory does not fill up; so are the
warm-up's uploads, before the phase (:meth:`UploadCheck.mark` before the warm-up).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from runner.catalogue.servers import UPLOADS_DIR
from runner.catalogue.workloads import WorkloadParams
from runner.load.result import PhaseResult
from runner.store.models import Sample

log = logging.getLogger(__name__)

#: rm's arguments per call when a container's files are removed with ``docker exec``.
REMOVE_BATCH = 1000


def slack(result: PhaseResult, params: WorkloadParams) -> int:
    """Uploads that may be stored without being counted as successful: those left in
    flight at the end (``result.unfinished``; None for wrk, which cannot tell: at most
    one per connection, i.e. ``params.clients``) plus the network-failed ones (an
    answer lost after the server stored the body)."""
    unfinished = params.clients if result.unfinished is None else max(0, result.unfinished)
    return unfinished + max(0, result.network_failed)


def _fmt(n: int) -> str:
    return f"{n:,}"


@dataclass
class UploadCheck:
    """One cell's check: :meth:`start` before the phase, :meth:`finish` after it.

    ``handle`` is the cell's runner.backends.base.ServerHandle (``stored_files``, and
    optionally ``remove_stored``). When the folder cannot be listed (an external server
    without a local home, a container gone), the check is left out with a note and the
    cell is judged on its figures alone."""

    handle: Any
    params: WorkloadParams
    before: set[str] | None = None
    note: str = ""
    samples: list[Sample] = field(default_factory=list)
    marked: set[str] | None = None

    def mark(self) -> None:
        """List the upload folder before the warm-up, so :meth:`start` can delete the
        warm-up's uploads (never raises; nothing is deleted when it cannot list)."""
        try:
            self.marked = {name for name, _ in self.handle.stored_files(UPLOADS_DIR)}
        except (OSError, ValueError, NotImplementedError):
            self.marked = None

    def start(self) -> None:
        """List the upload folder before the phase, deleting the files new since
        :meth:`mark` (the warm-up's uploads) when it was called (never raises)."""
        try:
            names = {name for name, _ in self.handle.stored_files(UPLOADS_DIR)}
        except (OSError, ValueError, NotImplementedError) as exc:
            self.note = f"stored files not checked: {exc}"
            log.info("%s", self.note)
            return
        if self.marked is not None:
            warm = sorted(names - self.marked)
            self._remove(warm)
            if not self.note:
                names -= set(warm)
        self.before = names

    def finish(self, result: PhaseResult) -> str | None:
        """List the folder again, compare with ``result`` and delete the new files.
        Returns the failure reason (e.g. ``"server answered 2xx to 1,000 uploads but
        stored 0 files"``) or None when the files match; fills :attr:`samples`. Never
        raises (a listing or removal error becomes :attr:`note`)."""
        if self.before is None:
            return None
        try:
            after = self.handle.stored_files(UPLOADS_DIR)
        except (OSError, ValueError) as exc:
            self.note = f"stored files not checked after the phase: {exc}"
            return None
        new = [(name, size) for name, size in after if name not in self.before]
        right = sum(1 for _, size in new if size == self.params.body_size)
        allowed = slack(result, self.params)
        ok = result.successful
        rows = {"before": len(self.before), "new": len(new), "new_right_size": right, "expected": ok,
                "slack": allowed}
        self.samples = [Sample(metric="stored_files", stat=k, value=float(v), unit="count") for k, v in rows.items()]
        self._remove([name for name, _ in new])
        size = f"{_fmt(self.params.body_size)} bytes"
        if right < ok:
            wrong = len(new) - right
            return (f"server answered 2xx to {_fmt(ok)} uploads but stored {_fmt(right)} files of {size}"
                    + (f" ({_fmt(wrong)} new files of another size)" if wrong else ""))
        if len(new) > ok + allowed:
            return (f"server answered 2xx to {_fmt(ok)} uploads but stored {_fmt(len(new))} new files "
                    f"(at most {_fmt(ok + allowed)} expected: {_fmt(allowed)} in flight or failed)")
        if len(new) - right > allowed:
            return (f"server stored {_fmt(len(new) - right)} files whose size is not {size} "
                    f"(at most {_fmt(allowed)} uploads were in flight or failed)")
        return None

    def _remove(self, names: list[str]) -> None:
        remove = getattr(self.handle, "remove_stored", None)
        if remove is None or not names:
            return
        try:
            remove(UPLOADS_DIR, names)
        except (OSError, ValueError) as exc:
            self.note = f"stored uploads not deleted: {exc}"
            log.warning("%s", self.note)


def judge(outcome: Any, check: UploadCheck, result: PhaseResult) -> None:
    """Run ``check.finish(result)`` and apply it to ``outcome`` (a runner.cell.outcome.CellOutcome,
    changed in place): its samples are added; a mismatch makes the outcome ``failed``
    with the reason (after the reason it already had, if any); a note (nothing checked,
    nothing deleted) goes to the summary. Never raises."""
    why = check.finish(result)
    outcome.samples += check.samples
    if why is not None:
        outcome.status = "failed"
        outcome.error = why if not outcome.error else f"{outcome.error}; {why}"
        outcome.summary += f"; {why}"
    elif check.note:
        outcome.summary += f"; {check.note}"
