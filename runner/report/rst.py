"""reStructuredText export: grid tables in seed 000's layout.

Layout (seed 000, ``docs/benchmarks.rst`` of pyftpdlib): a section title underlined
with ``-``, an optional italic caption paragraph, then a grid table with ``+---+``
borders, an ``=`` header separator, *italic* headers and **bold** wins; text
columns left-aligned, numeric columns right-aligned, one space of padding.

Cell text is escaped for inline markup (``*``, `````, ``_``, ``|``, ``\\``) and
for list markers at the start of a cell, so the output parses with docutils with
no warning (tested with ``docutils.core.publish_doctree``).

Text from a spec is untrusted: control characters (newlines) become single spaces, so no
text can end a table row or start a directive such as ``.. raw:: html``; and the
colon of a URI scheme docutils recognises as a standalone hyperlink
(``docutils.utils.urischemes``, e.g. ``javascript:`` or ``data:``) is escaped
(``javascript\\:``), so no text turns into a link. Ordinary text is unchanged.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from docutils.utils import urischemes

from runner.report.data import CampaignData
from runner.report.markup import document, one_line, padded
from runner.report.tables import Table

_INLINE = re.compile(r"([\\*`_|])")
# "scheme:" where docutils would start a standalone hyperlink (case-insensitive)
_SCHEME = re.compile(r"(?<![A-Za-z0-9.+-])(" + "|".join(sorted(map(re.escape, urischemes.schemes),
                                                                 key=len, reverse=True)) + r"):",
                     re.IGNORECASE)
# bullet or enumerator at the start of a cell ("- x", "1. x", "(a) x", "#. x")
_LIST_START = re.compile(r"^(?:[-+*\u2022\u2023\u2043]|\(?(?:\d+|[a-zA-Z#]|[ivxlcdmIVXLCDM]+)[.)])(?:\s|$)")

# constructs docutils recognises at the start of a line (a title is one): explicit markup
# ".. directive::", a literal-block marker "::", a doctest ">>>", a field list ":name:", a line
# block "| "
_LINE_START = re.compile(r"^(?:\.\.(?:\s|$)|::|>>>|:|\|(?:\s|$))")


def escape(text: str) -> str:
    """Escape ``text`` so docutils reads it literally inside a paragraph or table cell
    (no markup, no link, no line break: module docstring)."""
    out = _SCHEME.sub(r"\1\\:", _INLINE.sub(r"\\\1", one_line(text)))
    if _LIST_START.match(out) or _LINE_START.match(out):
        out = "\\" + out
    return out


def _cell(text: str, mark: str) -> str:
    if not text:
        return ""
    return f"**{escape(text)}**" if mark == "win" else escape(text)


def grid_table(table: Table) -> str:
    """The grid table alone (no title/caption), lines joined with ``\\n``, no trailing newline."""
    t = padded(table, header_cell=lambda h: f"*{escape(h)}*" if h else "", body_cell=_cell)

    def line(ch: str) -> str:
        return "+" + "+".join(ch * (w + 2) for w in t.widths) + "+"

    out = [line("-"), t.row(t.header, align_numeric=False), line("=")]
    for cells in t.body:
        out += [t.row(cells), line("-")]
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

    def title_lines(t: Table) -> list[str]:
        head = escape(t.title)
        return [head, heading * len(head), "", *([f"*{escape(t.caption)}*", ""] if t.caption else [])]

    return document(obj, table=grid_table, heading=title_lines if title else None)
