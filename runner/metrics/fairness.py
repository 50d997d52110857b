"""Fairness figures of one N-client cell: how evenly the server shared itself between its
clients (seed 004: vsftpd's 512 wget transfers "much less balanced" than
teepeedee's, one client at full bandwidth, then the next).

The one place these figures are computed, from the per-client list a cell stores as the
``raw`` of its ``fairness``/``jain`` sample (runner.cell.samples.phase_samples): rows
``[bytes, seconds, ok]`` for FTP phases, ``[requests, seconds, ok]`` for HTTP phases. So
the figures of a cell stored before they existed are derived from that list alone
(:func:`figures_from_raw`). Plain data and numpy: no import of the rest of ``runner``.

Definitions (docs/methodology.md, "Fairness"):

* a client's **rate**: FTP ``bytes / seconds`` in MiB/s (2**20 B/s), HTTP ``requests /
  seconds`` in req/s; 0 for a client with no time;
* a client's **share**, the quantity Jain's index and the CV are taken over: FTP the
  rate; HTTP the request count (the stored ``jain`` of HTTP cells has always been over
  counts; every HTTP client runs until the phase ends, so counts and rates differ by the
  few milliseconds each client started late);
* **Jain's index** ``(sum x)^2 / (n * sum x^2)`` (R. Jain, D. Chiu, W. Hawe, "A
  Quantitative Measure of Fairness and Discrimination for Resource Allocation in Shared
  Computer Systems", DEC-TR-301, 1984), in [1/n, 1];
* the **coefficient of variation** ``CV = sigma / mean`` with the *population* standard
  deviation (divisor n, not n - 1): the clients of a cell are the whole population, not
  a sample of one. Then ``J = 1 / (1 + CV^2)`` exactly (Jain et al. 1984), so either
  figure gives the other (:func:`cv_from_jain`);
* percentiles p50/p95 by linear interpolation between closest ranks (numpy's default,
  Hyndman & Fan type 7), as the latency percentiles.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MIB = 1 << 20
#: Clients below this make no distribution: single-session cells store no fairness.
MIN_CLIENTS = 2


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)`` over per-client shares,
    in [1/n, 1]; 1 means every client got the same share. Source: R. Jain, D. Chiu,
    W. Hawe, "A Quantitative Measure of Fairness and Discrimination for Resource
    Allocation in Shared Computer Systems", DEC-TR-301, 1984. Raises ValueError on
    an empty list; all-zero input gives 1.0 (equally starved)."""
    if not values:
        raise ValueError("jain_index of no values")
    s = sum(values)
    sq = sum(v * v for v in values)
    return 1.0 if sq == 0 else (s * s) / (len(values) * sq)


def coefficient_of_variation(values: Sequence[float]) -> float:
    """``population stdev / mean`` of ``values`` (numpy ``std`` with ``ddof=0``): 0 when
    every value is equal, and also for all-zero input (as :func:`jain_index` gives 1.0
    there). Raises ValueError on an empty list."""
    if not values:
        raise ValueError("coefficient_of_variation of no values")
    a = np.asarray(values, dtype=float)
    mean = float(a.mean())
    return 0.0 if mean == 0 else float(a.std(ddof=0)) / mean


def cv_from_jain(jain: float) -> float:
    """The population CV of the shares a Jain's index was taken over: ``sqrt(1/J - 1)``,
    from ``J = 1 / (1 + CV^2)`` (Jain, Chiu, Hawe 1984). For cells stored with a ``jain``
    sample but no ``cv``. Raises ValueError unless ``0 < jain <= 1`` (a rounding excess
    up to 1e-9 is read as 1)."""
    if not 0 < jain <= 1 + 1e-9:
        raise ValueError(f"Jain's index {jain!r} is outside (0, 1]")
    return math.sqrt(max(0.0, 1.0 / jain - 1.0))


@dataclass(frozen=True)
class FairnessFigures:
    """The per-client distribution of one cell.

    Attributes:
        clients: number of clients (>= 2).
        rate_unit: ``MiB/s`` (FTP) or ``req/s`` (HTTP).
        jain: Jain's index over the shares (module docstring), in [1/n, 1].
        cv: population coefficient of variation of the shares (>= 0).
        min_rate, p50_rate, p95_rate, max_rate: per-client rates in ``rate_unit``.
        min_time, p50_time, p95_time, max_time: per-client times (s).
    """

    clients: int
    rate_unit: str
    jain: float
    cv: float
    min_rate: float
    p50_rate: float
    p95_rate: float
    max_rate: float
    min_time: float
    p50_time: float
    p95_time: float
    max_time: float

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


#: FairnessFigures fields stored as ``fairness`` sample stats, with their unit (``rate``:
#: the figures' ``rate_unit``). ``jain`` carries the raw list; see runner.cell.samples.
STATS: tuple[tuple[str, str], ...] = (
    ("jain", "ratio"), ("cv", "ratio"),
    ("min_rate", "rate"), ("p50_rate", "rate"), ("p95_rate", "rate"), ("max_rate", "rate"),
    ("min_time", "s"), ("p50_time", "s"), ("p95_time", "s"), ("max_time", "s"))


def client_rates(raw: Sequence[Sequence[Any]], *, http: bool) -> list[float]:
    """Per-client rates of a stored per-client list (rows ``[bytes or requests, seconds,
    ok]``): MiB/s for FTP, req/s for HTTP; 0 for a client with no time. In the list's
    order. Raises ValueError for a row that is not at least two numbers."""
    out = []
    for row in raw:
        if len(row) < 2:
            raise ValueError(f"per-client row {row!r}: expected [amount, seconds, ok]")
        amount, seconds = float(row[0]), float(row[1])
        rate = amount / seconds if seconds > 0 else 0.0
        out.append(rate if http else rate / MIB)
    return out


def figures_from_raw(raw: Sequence[Sequence[Any]] | None, *, http: bool) -> FairnessFigures | None:
    """The fairness figures of one cell from its stored per-client list (the ``raw`` of
    its ``fairness``/``jain`` sample; rows ``[bytes, seconds, ok]`` FTP, ``[requests,
    seconds, ok]`` HTTP). None for fewer than :data:`MIN_CLIENTS` clients or no list.
    Raises ValueError for a malformed row."""
    if not raw or len(raw) < MIN_CLIENTS:
        return None
    rates = client_rates(raw, http=http)
    times = [float(r[1]) for r in raw]
    shares = [float(r[0]) for r in raw] if http else rates
    r = np.percentile(np.asarray(rates, dtype=float), [50, 95])
    t = np.percentile(np.asarray(times, dtype=float), [50, 95])
    return FairnessFigures(clients=len(raw), rate_unit="req/s" if http else "MiB/s",
                           jain=jain_index(shares), cv=coefficient_of_variation(shares),
                           min_rate=min(rates), p50_rate=float(r[0]), p95_rate=float(r[1]), max_rate=max(rates),
                           min_time=min(times), p50_time=float(t[0]), p95_time=float(t[1]), max_time=max(times))


def sorted_curve(raw: Sequence[Sequence[Any]], *, http: bool) -> list[float]:
    """The per-client rates sorted from the fastest client to the slowest: the curve the
    dashboard draws (clients on x by rank, rate on y). A fair server gives a flat line;
    seed 004's "one client at full bandwidth, then the next" a steep drop."""
    return sorted(client_rates(raw, http=http), reverse=True)


def stored_curve(raw: Any, *, http: bool) -> tuple[FairnessFigures, list[float]] | None:
    """The fairness figures and the sorted per-client curve (:func:`figures_from_raw`,
    :func:`sorted_curve`) of one cell's stored list, or None when there is none to draw:
    ``raw`` not a list, malformed rows (TypeError, ValueError), or fewer than
    :data:`MIN_CLIENTS` clients."""
    if not isinstance(raw, list):
        return None
    try:
        figs = figures_from_raw(raw, http=http)
        curve = sorted_curve(raw, http=http)
    except (TypeError, ValueError):
        return None
    return None if figs is None else (figs, curve)
