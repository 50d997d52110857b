"""The export-neutral table model of the report layer: :class:`Table` of
:class:`Column` and :class:`Row` of :class:`Cell` (runner.report.tables builds the
campaign's tables; runner.report.uploads the seed 002 table; every export renders them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from runner.report import fmt
from runner.report.stats import Comparison

Mark = Literal["", "win", "loss"]


@dataclass(frozen=True)
class Cell:
    """One formatted cell.

    Attributes:
        text: display text (plain, unescaped; each export escapes it).
        mark: ``"win"`` (bold; green in HTML), ``"loss"`` (red in HTML) or ``""``.
    """

    text: str
    mark: Mark = ""


@dataclass(frozen=True)
class Column:
    """A column: ``key`` (stable id, e.g. ``"a"``, ``"ratio"``), display ``header``,
    and ``numeric`` (right-aligned in Markdown, RST and rich)."""

    key: str
    header: str
    numeric: bool = False


@dataclass(frozen=True)
class Row:
    """A table row.

    Attributes:
        key: ``workload`` or ``workload[params_key]``; ``"start"`` for the memory
            table's first row, ``"geomean"`` for the geometric-mean row.
        cells: one per column.
        comparison: the comparison behind a comparison-table row (None otherwise).
        unit: unit of the row's values.
    """

    key: str
    cells: tuple[Cell, ...]
    comparison: Comparison | None = None
    unit: str = ""


@dataclass
class Table:
    """An export-neutral table.

    Attributes:
        kind: ``"comparison"``, ``"memory"`` or ``"campaign"``.
        title: section title, e.g. ``"pyftpdlib 0.7.0 vs. pyftpdlib 1.0.0"``.
        columns: column definitions.
        rows: formatted rows.
        caption: one-sentence note printed above the table (italic), or ``""``.
        records: raw unrounded values for CSV/JSON, one dict per record (all dicts
            of a table share the same keys, in order).
    """

    kind: str
    title: str
    columns: tuple[Column, ...]
    rows: list[Row]
    caption: str = ""
    records: list[dict] = field(default_factory=list)

    def oneliners(self) -> list[str]:
        """pyperf-style lines of a comparison table, one per compared row:
        ``"RETR (server -> client): 1652.7 MiB/s +- 2% -> 1524.1 MiB/s +- 3%: 1.08x slower"``."""
        return [f"{r.cells[0].text}: {fmt.oneliner(r.comparison, r.unit, r.cells[3].text)}"
                for r in self.rows if r.comparison is not None]
