"""Terminal rendering with rich (for the CLI), and pyperf-style one-liners.

Wins are ``bold green``, losses ``red``, as in the HTML export; numeric columns
right-aligned; the caption is shown under the table.
"""
from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table as RichTable

from runner.report.data import CampaignData
from runner.report.tables import Table, as_tables

#: rich styles of marked cells.
STYLES = {"win": "bold green", "loss": "red", "": ""}


def render_rich(table: Table) -> RichTable:
    """A ``rich.table.Table`` of ``table`` (title, caption, marked cells styled)."""
    rt = RichTable(title=_esc(table.title), caption=_esc(table.caption) if table.caption else None)
    for c in table.columns:  # titles hold labels such as "node-http [workers=4]": not rich markup
        rt.add_column(_esc(c.header), justify="right" if c.numeric else "left")
    for row in table.rows:
        rt.add_row(*(f"[{STYLES[c.mark]}]{_esc(c.text)}[/]" if c.mark else _esc(c.text)
                     for c in row.cells))
    return rt


def _esc(text: str) -> str:
    from rich.markup import escape
    return escape(text)


def render(obj: Table | Sequence[Table] | CampaignData, *, width: int = 120,
           color: bool = False) -> str:
    """Tables drawn by rich as text (``color=False``: plain box-drawing text, no
    ANSI codes). Raises TypeError for an unsupported ``obj``."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, force_terminal=color, no_color=not color,
                      color_system="standard" if color else None)
    for t in as_tables(obj):
        console.print(render_rich(t))
    return buf.getvalue()


def render_oneliners(table: Table) -> str:
    """One pyperf-style line per compared row of a comparison table, ``\\n``-terminated:
    ``RETR (server -> client): 1652.7 MiB/s +- 2% -> 1524.1 MiB/s +- 3%: 1.08x slower``."""
    return "".join(line + "\n" for line in table.oneliners())
