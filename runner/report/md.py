"""GitHub-flavoured Markdown export: pipe tables, numeric columns right-aligned.

Each table is preceded by a ``## title`` heading and its caption in italics;
wins are **bold** (GitHub Markdown has no colour). Cell text escapes ``|``,
``\\``, ``*``, ``_`` and backticks; columns are padded for readability.

Text from a spec (labels, campaign names) is untrusted: ``<`` becomes the entity
``&lt;`` (raw HTML and ``<scheme:...>`` autolinks then are plain text in every
renderer; a backslash before ``<`` is not an escape in all of them; ``>`` alone opens
nothing and stays, as in ``server -> client``), the
``(`` of ``](`` is escaped (no inline link or image), and control characters such as
newlines become single spaces, trimmed (a newline would end the table row and start
a new block).
Ordinary text (no ``<``, ``](`` or control characters) is unchanged.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from runner.report.data import CampaignData
from runner.report.markup import document, one_line, padded
from runner.report.tables import Table

_SPECIAL = re.compile(r"([\\|*_`])")


def escape(text: str) -> str:
    """Escape Markdown inline specials and the pipe-table separator, and neutralise
    raw HTML, links and line breaks (module docstring)."""
    out = _SPECIAL.sub(r"\\\1", one_line(text))
    return out.replace("<", "&lt;").replace("](", "]\\(")


def pipe_table(table: Table) -> str:
    """The pipe table alone, no trailing newline. Alignment row ``:---`` / ``---:``."""
    t = padded(table, header_cell=escape, min_width=3,
               body_cell=lambda text, mark: f"**{escape(text)}**" if mark == "win" and text else escape(text))
    align = "| " + " | ".join(("-" * (w - 1) + ":") if num else (":" + "-" * (w - 1))
                              for w, num in zip(t.widths, t.numeric)) + " |"
    return "\n".join([t.row(t.header), align, *(t.row(r) for r in t.body)])


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

    def heading(t: Table) -> list[str]:
        return [f"{'#' * level} {escape(t.title)}", "", *([f"_{escape(t.caption)}_", ""] if t.caption else [])]

    return document(obj, table=pipe_table, heading=heading if title else None)
