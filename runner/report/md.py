"""GitHub-flavoured Markdown export: pipe tables, numeric columns right-aligned.

Each table is preceded by a ``## title`` heading and its caption in italics;
wins are **bold** (GitHub Markdown has no colour). Cell text escapes ``|``,
``\\``, ``*``, ``_`` and backticks; columns are padded for readability.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from runner.report.data import CampaignData
from runner.report.tables import Table, as_tables

_SPECIAL = re.compile(r"([\\|*_`])")


def escape(text: str) -> str:
    """Escape Markdown inline specials and the pipe-table separator."""
    return _SPECIAL.sub(r"\\\1", text)


def pipe_table(table: Table) -> str:
    """The pipe table alone, no trailing newline. Alignment row ``:---`` / ``---:``."""
    header = [escape(c.header) for c in table.columns]
    body = [[(f"**{escape(c.text)}**" if c.mark == "win" and c.text else escape(c.text))
             for c in row.cells] for row in table.rows]
    widths = [max(3, *(len(x) for x in col)) for col in zip(header, *body)]
    numeric = [c.numeric for c in table.columns]

    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if num else c.ljust(w)
                                 for c, w, num in zip(cells, widths, numeric)) + " |"

    align = "| " + " | ".join(("-" * (w - 1) + ":") if num else (":" + "-" * (w - 1))
                              for w, num in zip(widths, numeric)) + " |"
    return "\n".join([row(header), align, *(row(r) for r in body)])


def render(obj: Table | Sequence[Table] | CampaignData, *, title: bool = True,
           level: int = 2) -> str:
    """Render tables as GitHub Markdown.

    Args:
        obj: a Table, a sequence of Tables, or CampaignData (default report).
        title: emit ``#``-heading (``level``) and the italic caption before each table.
        level: heading level (1-6).

    Returns: the text, tables separated by a blank line, ending with ``\\n``.
    Raises: TypeError for an unsupported ``obj``; ValueError for a bad ``level``.
    """
    if not 1 <= level <= 6:
        raise ValueError(f"md.render: level must be 1..6, got {level}")
    parts = []
    for t in as_tables(obj):
        block = []
        if title:
            block += [f"{'#' * level} {escape(t.title)}", ""]
            if t.caption:
                block += [f"_{escape(t.caption)}_", ""]
        block.append(pipe_table(t))
        parts.append("\n".join(block))
    return "\n\n".join(parts) + "\n"
