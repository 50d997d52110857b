"""The skeleton shared by the plain-text markup exports (Markdown pipe tables, RST grid
tables): one-line cell text, padded columns, and a document of titled tables.

Each format gives its hooks: how a header and a body cell are written (escaping,
emphasis of wins), how a row and the separator lines are drawn, and the lines that
stand before a table (title, caption). Columns are padded to the widest cell; numeric
columns right-aligned.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runner.report.data import CampaignData
from runner.report.tables import Table, as_tables

#: Characters that would end a table row or a paragraph: C0 controls, DEL, and the
#: Unicode line and paragraph separators.
CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` with control characters as single spaces, trimmed (only when it has any:
    ordinary text is returned unchanged, a trailing space would also end emphasis badly)."""
    return " ".join(CONTROL.sub(" ", text).split()) if CONTROL.search(text) else text


@dataclass(frozen=True)
class PaddedTable:
    """A table's cells as markup, and the width and alignment of each column.

    Attributes:
        header: one string per column (already escaped by the format).
        body: one list of strings per row.
        widths: characters of each column (its widest cell, at least the format's minimum).
        numeric: per column, True when it holds numbers (right-aligned).
    """

    header: list[str]
    body: list[list[str]]
    widths: list[int]
    numeric: list[bool]

    def row(self, cells: Sequence[str], *, align_numeric: bool = True) -> str:
        """``| a | b |`` with each cell padded to its column (numeric ones right-aligned
        when ``align_numeric``)."""
        return "| " + " | ".join(c.rjust(w) if (align_numeric and num) else c.ljust(w)
                                 for c, w, num in zip(cells, self.widths, self.numeric)) + " |"


def padded(table: Table, *, header_cell: Callable[[str], str], body_cell: Callable[[str, str], str],
           min_width: int = 0) -> PaddedTable:
    """The cells of ``table`` written by the format's hooks: ``header_cell(header)`` and
    ``body_cell(text, mark)`` (``mark``: ``"win"``, ``"loss"`` or ``""``)."""
    header = [header_cell(c.header) for c in table.columns]
    body = [[body_cell(c.text, c.mark) for c in row.cells] for row in table.rows]
    widths = [max(min_width, *(len(x) for x in col)) for col in zip(header, *body)]
    return PaddedTable(header, body, widths, [c.numeric for c in table.columns])


def document(obj: Table | Sequence[Table] | CampaignData, *, table: Callable[[Table], str],
             heading: Callable[[Table], list[str]] | None) -> str:
    """Every table of ``obj`` (:func:`runner.report.tables.as_tables`) drawn by ``table``,
    each preceded by the lines ``heading(t)`` (none when ``heading`` is None), tables
    separated by a blank line, ending with ``\\n``. Raises TypeError for an unsupported ``obj``."""
    parts = []
    for t in as_tables(obj):
        block = heading(t) if heading is not None else []
        block.append(table(t))
        parts.append("\n".join(block))
    return "\n\n".join(parts) + "\n"
