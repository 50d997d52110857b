"""Text formatting of values, ratios and speedups, shared by every export.

Conventions (docs/methodology.md):

* Values keep the seed's two decimals and show at least three significant
  digits: ``1652.72 MiB/s``, ``1.70 s``, ``0.190 s``, ``0.0234 s``. Units are our
  metric units (``MiB/s``, ``s``, ``ms``), not the seed's ``MB/sec`` / ``secs``.
* Byte counts (memory) as seed 000 / ftpbench's ``bytes2human``: one decimal and a
  binary-unit suffix, ``352.0K``, ``6.7M``, ``568.6M``, ``100.0B``.
* The CI is printed as the relative half-width, ``+- 2%`` (``+- 0.4%`` below 1%).
* Ratio text is pyperf's ``format_normalized_mean``: ``1.08x faster``,
  ``1.08x slower``, ``no change``; ``not significant`` when the Mann-Whitney U
  test does not reject at alpha (pyperf ``compare_to --table``).
* Speedup text is seed 001's ``"+%.2f" % speedup`` plus ``x``: ``+0.08x``, ``-0.02x``,
  ``0.00x`` when it rounds to zero.
"""
from __future__ import annotations

import math

from runner.report.stats import Comparison, Summary

NA = "n/a"


def number(value: float, min_decimals: int = 2, sig: int = 3) -> str:
    """``value`` with at least ``min_decimals`` decimals and ``sig`` significant digits.

    ``number(1652.7213) == "1652.72"``, ``number(0.19) == "0.190"``,
    ``number(0.0234) == "0.0234"``, ``number(0) == "0.00"``.
    """
    if value == 0 or not math.isfinite(value):
        return f"{value:.{min_decimals}f}"
    exponent = math.floor(math.log10(abs(value)))
    decimals = max(min_decimals, sig - 1 - exponent)
    return f"{value:.{decimals}f}"


def bytes2human(n: float) -> str:
    """Bytes as seed 000's memory table (ftpbench ``bytes2human``, binary units):
    ``bytes2human(360448) == "352.0K"``, ``bytes2human(7025459) == "6.7M"``."""
    for i, symbol in reversed(list(enumerate("KMGTPE", start=1))):
        div = 1 << (10 * i)
        if abs(n) >= div:
            return f"{n / div:.1f}{symbol}"
    return f"{float(n):.1f}B"


#: Units printed without a suffix: a dimensionless ratio such as Jain's index (``0.980``).
UNITLESS = ("ratio",)


def value(v: float, unit: str, *, min_decimals: int = 2) -> str:
    """A value with its unit: ``"1652.72 MiB/s"``, ``"0.190 s"``; bytes via :func:`bytes2human`;
    a ratio (:data:`UNITLESS`) bare: ``"0.980"``."""
    if unit == "bytes":
        return bytes2human(v)
    text = number(v, min_decimals)
    return f"{text} {unit}" if unit and unit not in UNITLESS else text


def rel_ci(rel: float | None) -> str:
    """Relative CI half-width as ``"+- 2%"`` (``"+- 0.4%"`` below 1%); ``""`` when undefined."""
    if rel is None:
        return ""
    pct = rel * 100.0
    return f"+- {pct:.0f}%" if pct >= 1.0 or pct == 0 else f"+- {pct:.1f}%"


def summary(s: Summary, unit: str, *, ci: bool = False, min_decimals: int = 2) -> str:
    """Median with unit, plus ``" +- 2%"`` when ``ci`` and the CI is defined."""
    text = value(s.median, unit, min_decimals=min_decimals)
    if ci and s.rel_ci is not None:
        text = f"{text} {rel_ci(s.rel_ci)}"
    return text


def ci_bounds(s: Summary, unit: str) -> str:
    """The CI of the median as ``"[1600.12, 1700.34] MiB/s"``; ``"n/a"`` when n < 2."""
    if s.ci_low is None or s.ci_high is None:
        return NA
    if unit == "bytes":
        return f"[{bytes2human(s.ci_low)}, {bytes2human(s.ci_high)}]"
    return f"[{number(s.ci_low)}, {number(s.ci_high)}] {'' if unit in UNITLESS else unit}".rstrip()


#: The words of :func:`normalized`: (better, worse). Figures that are not speeds (Jain's
#: index) use ``("higher", "lower")`` or ``("lower", "higher")`` instead.
SPEED_WORDS = ("faster", "slower")


def normalized(slowdown: float, words: tuple[str, str] = SPEED_WORDS) -> str:
    """pyperf ``format_normalized_mean`` of a time-like ratio (> 1 = slower; ``words``:
    what to call better and worse)."""
    if slowdown == 1.0:
        return "no change"
    if slowdown < 1.0:
        return f"{1.0 / slowdown:.2f}x {words[0]}"
    return f"{slowdown:.2f}x {words[1]}"


def ratio(c: Comparison, *, check_significant: bool = True, words: tuple[str, str] = SPEED_WORDS) -> str:
    """Ratio column text: ``"1.08x slower"``, ``"1.08x faster"``, ``"no change"``,
    ``"not significant"`` (when ``check_significant``), or ``"n/a"`` (zero median);
    ``words`` as :func:`normalized`."""
    if c.slowdown is None:
        return NA
    if check_significant and not c.significant and c.direction != "same":
        return "not significant"
    return normalized(c.slowdown, words)


def speedup(c: Comparison) -> str:
    """Seed 001's speedup text, ``"+%.2fx"``: ``"+0.08x"``, ``"-0.02x"``; ``"n/a"`` if undefined."""
    if c.speedup is None:
        return NA
    return speedup_value(c.speedup)


def speedup_value(v: float) -> str:
    """``"%+.2fx"`` of a speedup (``"+0.08x"``, ``"-0.02x"``); ``"0.00x"`` when it rounds
    to zero (the seed prints ``0x``), never ``"-0.00x"``."""
    text = f"{v:+.2f}"
    return ("0.00" if text in ("+0.00", "-0.00") else text) + "x"


def oneliner(c: Comparison, unit: str, verdict: str | None = None) -> str:
    """pyperf-style one-line comparison (DESIGN.md):
    ``"1652.7 MiB/s +- 2% -> 1524.1 MiB/s +- 3%: 1.08x slower"``.

    Values use one decimal (at least three significant digits); the verdict is
    ``not significant`` when the test does not reject, as pyperf prints it
    (``verdict``: the text to print instead of :func:`ratio`'s, e.g. a table's ratio cell)."""
    a = summary(c.a, unit, ci=True, min_decimals=1)
    b = summary(c.b, unit, ci=True, min_decimals=1)
    return f"{a} -> {b}: {ratio(c) if verdict is None else verdict}"
