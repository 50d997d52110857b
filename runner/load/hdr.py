"""HDR latency histograms of the sustained-load workloads (docs/methodology.md,
"Sustained load"), on the ``hdrhistogram`` library (``hdrh``; G. Tene's HdrHistogram).

Settings, the same everywhere so histograms of several load processes or hosts add:
values are recorded in **microseconds**, integers from 1 to :data:`HIGHEST_US` (one hour),
with **3 significant decimal digits** (any recorded value is reported within 0.1% of
itself). A value below 1 us is recorded as 1 us; one above an hour as one hour (a phase is
bounded by ``phase_timeout`` long before). Histograms travel and are stored as the
library's compressed base64 text (``HISTFAAA...``), which :func:`merge` adds exactly: the
merged histogram is the histogram of all values (HDR histograms add bucket by bucket).
"""
from __future__ import annotations

from collections.abc import Iterable

from hdrh.histogram import HdrHistogram

#: Lowest and highest trackable value (us) and significant digits of every histogram.
LOWEST_US = 1
HIGHEST_US = 3600 * 1_000_000
SIGNIFICANT_DIGITS = 3
#: Percentiles reported from a histogram (as ``p50`` ... ``p99``; ``max`` besides).
PERCENTILES = (50.0, 90.0, 95.0, 99.0)


def new_histogram() -> HdrHistogram:
    """An empty histogram with the module's settings (us, 1 us .. 1 h, 3 digits)."""
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)


def record_s(h: HdrHistogram, seconds: float) -> None:
    """Record a latency given in seconds into ``h`` (as whole microseconds, rounded,
    clamped to [1 us, 1 h]). A negative value (a clock that cannot go backwards did)
    raises ValueError."""
    if seconds < 0:
        raise ValueError(f"negative latency {seconds!r} s")
    h.record_value(min(max(round(seconds * 1e6), LOWEST_US), HIGHEST_US))


def encode(h: HdrHistogram) -> str:
    """``h`` as the library's compressed base64 text (ASCII)."""
    return h.encode().decode("ascii")


def decode(text: str) -> HdrHistogram:
    """Inverse of :func:`encode`. Raises ValueError for text that is not an encoded
    histogram."""
    try:
        return HdrHistogram.decode(text.encode("ascii"))
    except Exception as e:  # the library raises zlib/struct/base64 errors of its own
        raise ValueError(f"not an encoded HDR histogram: {str(text)[:40]!r}: {e}") from e


def merge(texts: Iterable[str]) -> str | None:
    """The sum of several encoded histograms, encoded; None for none. Exact: the result
    counts every value of every input in the same bucket. Raises ValueError for a text
    that does not decode."""
    total: HdrHistogram | None = None
    for t in texts:
        h = decode(t)
        if total is None:
            total = h
        else:
            total.add(h)
    return None if total is None else encode(total)


def percentiles_ms(text: str) -> dict[str, float]:
    """``{"p50", "p90", "p95", "p99", "max"}`` of an encoded histogram in **milliseconds**
    (the library's value at each percentile, i.e. the highest value equivalent to the
    bucket holding it, within 0.1%); ``{}`` for an empty histogram. Raises ValueError as
    :func:`decode`."""
    h = decode(text)
    if h.get_total_count() == 0:
        return {}
    out = {f"p{p:g}": h.get_value_at_percentile(p) / 1000.0 for p in PERCENTILES}
    out["max"] = h.get_max_value() / 1000.0
    return out


def count(text: str) -> int:
    """Values recorded in an encoded histogram. Raises ValueError as :func:`decode`."""
    return int(decode(text).get_total_count())
