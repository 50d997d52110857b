"""HTML export: a Jinja2 template (``templates/tables.html.j2``), wins in green and
losses in red as in seed 001 (there ``<font color='green'>``; here a ``win`` /
``loss`` class plus an inline ``color`` style, so the colours survive embedding in
a page without our style sheet). Wins are also bold, like the RST export.

All text is autoescaped by Jinja2. ``fragment=True`` returns a
``<div class="xferlab-report">`` for the dashboard to embed; otherwise a complete
standalone HTML5 document.

With ``charts`` (runner.report.charts.chart_data) the document is the report a person
sends: one self-contained file, the "Conducted on" and "Setup" tables first, then the
charts, then every other table. The chart data is embedded as JSON in a
``<script type="application/json">`` (Jinja2's ``tojson``: ``<``, ``>``, ``&`` and ``'``
written as ``\u003c``... so no text of the data can end the element), drawn by
``templates/report.js`` with the Chart.js text handed in (inlined: the file needs no network).
A Content-Security-Policy allows no request at all and only the inlined scripts, by
their SHA-256 (CSP Level 2 hash sources), so markup smuggled into the file could run nothing.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.resources
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2

from runner.report.data import CampaignData
from runner.report.tables import Table, as_tables

#: Inline styles of marked cells (seed 001: green wins, red losses).
STYLES = {"win": "color: green; font-weight: bold", "loss": "color: red"}

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("runner.report", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
)


#: The chart sections of the report, in order: (key of chart_data, heading, caption).
SECTIONS = (
    ("bars", "Per benchmark",
     "Median of the repeats of each server; the whisker is the confidence interval of the median (distribution-free: "
     "order statistics of the repeats, 95% when there are enough of them; each chart gives its coverage; none for a "
     "single repeat); docs/methodology.md."),
    ("ratios", "Comparison",
     "Each server against the reference, per benchmark: times better (higher throughput, fewer seconds); "
     "green or red when Mann-Whitney U on the repeats finds the difference significant, grey otherwise; "
     "the geometric mean last."),
    ("memory", "Memory over time",
     "The server's USS (its process tree's unique set size) sampled during the first repeat of each benchmark."),
    ("fairness", "Fairness",
     "Jain's index over the clients of each N-client benchmark, then every client's rate, fastest first, of one cell "
     "(pick it; the least fair opens): a fair server draws a flat line."),
    ("saturation", "Saturation",
     "A sustained workload swept over the number of clients N: throughput and p99 latency from each operation's "
     "intended start, the knee marked (docs/methodology.md, \"Saturation curve\")."),
)

#: Tables shown before the charts: where and how the figures were measured.
LEAD_KINDS = ("context", "setup", "environment_diff")

#: Text that would end an inlined ``<script>`` element or open an HTML comment inside it.
_SCRIPT_END = re.compile(r"</script|<!--", re.IGNORECASE)


def _script_hash(text: str) -> str:
    """The CSP hash source of an inline script: ``'sha256-BASE64'`` of its UTF-8 text."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _has_charts(key: str, charts: Mapping[str, Any]) -> bool:
    value = charts.get(key)
    if isinstance(value, Mapping):
        return any(value.values())
    return bool(value)


def render(obj: Table | Sequence[Table] | CampaignData, *, fragment: bool = False,
           title: bool = True, doc_title: str | None = None, note: str = "",
           charts: Mapping[str, Any] | None = None, chartjs: str | None = None) -> str:
    """Render tables as HTML.

    Args:
        obj: a Table, a sequence of Tables, or CampaignData (default report).
        fragment: return only ``<div class="xferlab-report">...</div>`` (no
            ``<html>``, no style sheet) for embedding.
        title: emit each table's title (``<h2>``) and caption (``<p><i>``).
        doc_title: ``<title>`` and ``<h1>`` of a standalone document (default:
            the first table's title, or the campaign name for CampaignData).
        note: italic paragraph under the ``<h1>`` (e.g. the machine description,
            as seed 001's "All the benchmarks were conducted on ...").
        charts: the chart data (runner.report.charts.chart_data); with it a standalone
            document is the report with charts (module docstring). Ignored with ``fragment``.
        chartjs: the text of a Chart.js 3 UMD build, inlined (Debian's libjs-chart.js
            ``chart.min.js``); None: the report says its charts were left out.

    Returns: the HTML text ending with ``\\n``.
    Raises: TypeError for an unsupported ``obj``; ValueError when ``chartjs`` holds
        ``</script`` or ``<!--`` (it would end the inlined element).
    """
    tables = as_tables(obj)
    if doc_title is None:
        if isinstance(obj, CampaignData):
            doc_title = f"xferlab campaign {obj.name}"
        else:
            doc_title = tables[0].title if tables else "xferlab report"
    extra: dict[str, Any] = {"charts": None}
    if charts is not None and not fragment:
        if chartjs is not None and _SCRIPT_END.search(chartjs):
            raise ValueError("the Chart.js text holds '</script' or '<!--': it cannot be inlined")
        script = importlib.resources.files("runner.report").joinpath("templates/report.js").read_text()
        scripts = ([chartjs] if chartjs is not None else []) + [script]
        extra = {
            "charts": charts, "scripts": scripts, "script_hashes": " ".join(_script_hash(x) for x in scripts),
            "sections": [sec for sec in SECTIONS if _has_charts(sec[0], charts)],
            "lead": [t for t in tables if t.kind in LEAD_KINDS],
            "rest": [t for t in tables if t.kind not in LEAD_KINDS],
            "charts_note": ("The charts of this report are drawn by its scripts: allow JavaScript for this file "
                            "to see them." if chartjs is not None else
                            "This report was exported without Chart.js (Debian package libjs-chart.js, or "
                            "XFERLAB_CHARTJS_PATH): its charts are left out, its tables are all here."),
        }
    return _ENV.get_template("tables.html.j2").render(
        tables=tables, fragment=fragment, show_title=title, doc_title=doc_title,
        note=note, styles=STYLES, **extra)
