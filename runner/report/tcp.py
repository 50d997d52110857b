"""The "Kernel TCP counters" table: for every cell where a counter was non-zero, the
counters of its phase and the server's listen backlog (runner.report.data.CellTcp), so a
report that says "154 of 300 sessions waited > 3 s" also says "148 listen overflows;
backlog 32" (docs/methodology.md, "Listen backlog").

Input is plain data; output an export-neutral :class:`runner.report.model.Table` (kind
``tcp``) that every export draws like the others.
"""
from __future__ import annotations

from runner.metrics.tcpstats import format_tcp_counters
from runner.report.data import CampaignData
from runner.report.model import Cell, Column, Row, Table

COLUMNS = (Column("server", "server"), Column("workload", "workload"), Column("repeat", "repeat", numeric=True),
           Column("status", "status"), Column("counters", "kernel TCP counters of the phase"),
           Column("backlog", "listen backlog", numeric=True))
CAPTION = ("Counted in the server's network namespace over the phase; under the local backend that namespace is "
           "the machine's, so retransmits and resets also count the load generator's side and other traffic.")


def tcp_table(data: CampaignData) -> Table | None:
    """One row per cell of ``data.tcp`` with a non-zero counter, in cell order: server,
    workload title, repeat (1 = first), status, the counters' sentence
    (runner.metrics.tcpstats.format_tcp_counters: ``"148 listen overflows, 148 listen
    drops"``) and the smallest listen backlog (``n/a`` when not read). None when no cell
    has a non-zero counter. Records: ``{"server", "workload", "params_key", "repeat",
    "status", "counters" (kernel name -> count), "listen_backlog"}``."""
    cells = [c for c in data.tcp if c.counters]
    if not cells:
        return None
    rows, records = [], []
    for c in cells:
        backlog = "n/a" if c.listen_backlog is None else str(c.listen_backlog)
        texts = (c.server, c.title, str(c.repeat + 1), c.status, format_tcp_counters(c.counters), backlog)
        rows.append(Row(f"tcp:{c.server}:{c.workload}[{c.params_key}]:{c.repeat}", tuple(Cell(t) for t in texts)))
        records.append({"server": c.server, "workload": c.workload, "params_key": c.params_key,
                        "repeat": c.repeat, "status": c.status, "counters": dict(c.counters),
                        "listen_backlog": c.listen_backlog})
    return Table("tcp", "Kernel TCP counters", COLUMNS, rows, CAPTION, records)
