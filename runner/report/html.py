"""HTML export: a Jinja2 template (``templates/tables.html.j2``), wins in green and
losses in red as in seed 001 (there ``<font color='green'>``; here a ``win`` /
``loss`` class plus an inline ``color`` style, so the colours survive embedding in
a page without our style sheet). Wins are also bold, like the RST export.

All text is autoescaped by Jinja2. ``fragment=True`` returns a
``<div class="xferlab-report">`` for the dashboard to embed; otherwise a complete
standalone HTML5 document.
"""
from __future__ import annotations

from collections.abc import Sequence

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


def render(obj: Table | Sequence[Table] | CampaignData, *, fragment: bool = False,
           title: bool = True, doc_title: str | None = None, note: str = "") -> str:
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

    Returns: the HTML text ending with ``\\n``.
    Raises: TypeError for an unsupported ``obj``.
    """
    tables = as_tables(obj)
    if doc_title is None:
        if isinstance(obj, CampaignData):
            doc_title = f"xferlab campaign {obj.name}"
        else:
            doc_title = tables[0].title if tables else "xferlab report"
    return _ENV.get_template("tables.html.j2").render(
        tables=tables, fragment=fragment, show_title=title, doc_title=doc_title,
        note=note, styles=STYLES)
