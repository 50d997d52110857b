"""Retry the runner's store operations while PostgreSQL restarts or is briefly unreachable.

A campaign runs for hours; the database may be restarted (an upgrade, a failover, the
lab's container restarting) in the middle. Without a retry, the first query after the
restart raises ``OperationalError`` ("terminating connection due to administrator
command", "connection refused") and the runner dies with a measured cell unstored.

:func:`store_retry` runs one store step (claim a cell, store a cell's outcome) and, on a
*connection* error only, rolls the session back (the pool then drops the dead
connection; ``pool_pre_ping`` checks the next one), tells the operator what happened
and when it tries again, waits with exponential backoff (0.5 s doubling, at most 8 s
between tries) and runs the step again, for at most ``max_wait`` seconds (default 120)
in all. Past that it raises :class:`StoreUnavailable` naming the step, how long it tried
and the last error; the campaign is then resumable (``xferlab resume``), as after a
killed runner. Errors that are not about the connection (a constraint, a bug) are
raised at once. A step must be safe to run again after a rollback: every runner step
is one transaction that commits at its end.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy import exc as sa_exc

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds before the first retry; doubled after each failure, capped at BACKOFF_CAP.
BACKOFF_START = 0.5
BACKOFF_CAP = 8.0
#: Seconds a step is retried in all before StoreUnavailable.
MAX_WAIT = 120.0


class StoreUnavailable(RuntimeError):
    """The store stayed unreachable for the whole retry window; the message names the
    step, the time spent and the last error."""


class _Messages(Protocol):
    def message(self, text: str) -> None: ...


def is_connection_error(err: BaseException) -> bool:
    """True for errors meaning "the database connection is gone or cannot be made":
    SQLAlchemy's OperationalError and InterfaceError (psycopg's connection refused, server
    closed the connection, admin shutdown), a DBAPIError with ``connection_invalidated``,
    and the PendingRollbackError left by one of those."""
    if isinstance(err, sa_exc.DBAPIError) and err.connection_invalidated:
        return True
    return isinstance(err, (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.PendingRollbackError))


def _first_line(err: BaseException) -> str:
    text = str(getattr(err, "orig", None) or err).strip().splitlines()
    return f"{type(getattr(err, 'orig', None) or err).__name__}: {text[0] if text else ''}"[:300]


def store_retry(session: Any, step: Callable[[], T], what: str, reporter: _Messages | None = None, *,
                max_wait: float = MAX_WAIT, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``step()`` (which uses ``session``) and return its result, retrying it while the
    database connection fails (module docstring).

    Args:
        session: the SQLAlchemy Session the step uses; rolled back before each retry
            (None: nothing to roll back).
        step: the store operation, re-runnable after a rollback.
        what: what the step does, for the operator, e.g. ``"storing cell 12"``.
        reporter: gets one ``message`` per failure and one when the store answers again
            (also logged as warnings).
        max_wait: seconds of retrying in all before giving up (the next wait would pass it).
        sleep: the wait function (tests pass one that records instead of sleeping).

    Raises:
        StoreUnavailable: still failing after ``max_wait`` s (chained to the last error).
        Exception: any error that is not a connection error, at once.
    """
    t0 = time.monotonic()
    delay = BACKOFF_START
    failures = 0
    slept = 0.0
    for _ in range(10_000):  # bounded; the deadline ends it long before
        try:
            result = step()
        except Exception as err:  # noqa: BLE001 - filtered just below
            if not is_connection_error(err):
                raise
            failures += 1
            if session is not None:
                try:
                    session.rollback()
                except Exception:  # noqa: BLE001 - the connection is gone; the pool discards it
                    pass
            waited = max(time.monotonic() - t0, slept)  # slept: the waits asked of ``sleep``
            if waited + delay > max_wait:
                raise StoreUnavailable(f"store unreachable while {what}: gave up after {waited:.0f} s and "
                                       f"{failures} tries ({_first_line(err)}); the campaign can be resumed "
                                       "with xferlab resume") from err
            _say(reporter, f"store unreachable while {what} ({_first_line(err)}); try {failures + 1} in "
                           f"{delay:.1f} s (giving up after {max_wait:.0f} s)")
            sleep(delay)
            slept += delay
            delay = min(delay * 2, BACKOFF_CAP)
            continue
        if failures:
            _say(reporter, f"store reachable again: {what} done after {failures} failed tries, "
                           f"{time.monotonic() - t0:.1f} s")
        return result
    raise StoreUnavailable(f"store unreachable while {what}: too many tries")  # pragma: no cover


def _say(reporter: _Messages | None, text: str) -> None:
    log.warning("%s", text)
    if reporter is not None:
        try:
            reporter.message(text)
        except Exception:  # noqa: BLE001 - a display problem must not end the retry
            log.debug("reporter failed", exc_info=True)
