"""reStructuredText export: grid tables in seed 000's layout.

Layout (seed 000, ``docs/benchmarks.rst`` of pyftpdlib): a section title underlined
with ``-``, an optional italic caption paragraph, then a grid table with ``+---+``
borders, an ``=`` header separator, *italic* headers and **bold** wins; text
columns left-aligned, numeric columns right-aligned, one space of padding.

Cell text is escaped for inline markup (``*``, `````, ``_``, ``|``, ``\\``) and
for list markers at the start of a cell, so the output parses with docutils with
no warning (tested with ``docutils.core.publish_doctree``).
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from runner.report.data import CampaignData
from runner.report.tables import Table, as_tables

_INLINE = re.compile(r"([\\*`_|])")
# bullet or enumerator at the start of a cell ("- x", "1. x", "(a) x", "#. x")
_LIST_START = re.compile(r"^(?:[-+*\u2022\u2023\u2043]|\(?(?:\d+|[a-zA-Z#]|[ivxlcdmIVXLCDM]+)[.)])(?:\s|$)")


def escape(text: str) -> str:
    """Escape ``text`` so docutils reads it literally inside a paragraph or table cell."""
    out = _INLINE.sub(r"\\\1", text)
    if _LIST_START.match(out):
        out = "\\" + out
    return out


def _cell(text: str, mark: str) -> str:
    if not text:
        return ""
    return f"**{escape(text)}**" if mark == "win" else escape(text)


def grid_table(table: Table) -> str:
    """The grid table alone (no title/caption), lines joined with ``\\n``, no trailing newline."""
    header = [f"*{escape(c.header)}*" if c.header else "" for c in table.columns]
    body = [[_cell(cell.text, cell.mark) for cell in row.cells] for row in table.rows]
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    numeric = [c.numeric for c in table.columns]

    def line(ch: str) -> str:
        return "+" + "+".join(ch * (w + 2) for w in widths) + "+"

    def row(cells: Sequence[str], align_numeric: bool) -> str:
        parts = [(c.rjust(w) if (align_numeric and num) else c.ljust(w))
                 for c, w, num in zip(cells, widths, numeric)]
        return "| " + " | ".join(parts) + " |"

    out = [line("-"), row(header, False), line("=")]
    for cells in body:
        out += [row(cells, True), line("-")]
    return "\n".join(out)


def render(obj: Table | Sequence[Table] | CampaignData, *, title: bool = True,
           heading: str = "-") -> str:
    """Render tables as reStructuredText.

    Args:
        obj: a Table, a sequence of Tables, or CampaignData (its default report,
            :func:`runner.report.tables.report_tables`).
        title: emit each table's title as a section heading underlined with
            ``heading`` and its caption as an italic paragraph (seed 000).
        heading: underline character of the section titles.

    Returns: the document text, tables separated by a blank line, ending with ``\\n``.
    Raises: TypeError for an unsupported ``obj``.
    """
    parts = []
    for t in as_tables(obj):
        block = []
        if title:
            head = escape(t.title)
            block += [head, heading * len(head), ""]
            if t.caption:
                block += [f"*{escape(t.caption)}*", ""]
        block.append(grid_table(t))
        parts.append("\n".join(block))
    return "\n\n".join(parts) + "\n"
