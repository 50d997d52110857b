"""The "Kernel TCP counters" table: for every cell family where a counter was non-zero,
the counters of its phases and the server's listen backlog (runner.report.data.CellTcp), so a
report that says "154 of 300 sessions waited > 3 s" also says "148 listen overflows;
backlog 32" (docs/methodology.md, "Listen backlog").

Input is plain data; output an export-neutral :class:`runner.report.model.Table` (kind
``tcp``) that every export draws like the others.
"""
from __future__ import annotations

from runner.metrics.tcpstats import format_tcp_counters
from runner.report.data import CampaignData, CellTcp
from runner.report.model import Cell, Column, Row, Table

COLUMNS = (Column("server", "server"), Column("workload", "workload"), Column("status", "status"),
           Column("repeats", "repeats"),
           Column("counters", "kernel TCP counters (sum)"),
           Column("backlog", "listen backlog", numeric=True))
CAPTION = ("Counted in the server's network namespace over the phase; under the local backend that namespace is "
           "the machine's, so retransmits and resets also count the load generator's side and other traffic. "
           "One row per cell family and status; the JSON and CSV exports keep every repeat.")


def tcp_table(data: CampaignData) -> Table | None:
    """The counters of ``data.tcp`` grouped by cell family (server, workload and
    parameters) and status, in first-cell order, rows only for families where a counter
    was non-zero: server, workload title, status, which repeats had a count out of the
    family's repeats with that status (``"1, 3 of 5"``; 1 = first), the counters' sentence
    over those repeats summed (runner.metrics.tcpstats.format_tcp_counters: ``"148 listen
    overflows, 148 listen drops"``) and the smallest listen backlog (``n/a`` when not
    read). None when no cell has a non-zero counter.

    Records stay one per cell with a non-zero counter, in cell order: ``{"server",
    "workload", "params_key", "repeat", "status", "counters" (kernel name -> count),
    "listen_backlog"}``."""
    cells = [c for c in data.tcp if c.counters]
    if not cells:
        return None
    families: dict[tuple[str, str, str, str], list[CellTcp]] = {}
    for c in data.tcp:
        families.setdefault((c.server, c.workload, c.params_key, c.status), []).append(c)
    rows: list[Row] = []
    for (server, workload, params_key, status), members in families.items():
        counted = [c for c in members if c.counters]
        if not counted:
            continue
        total: dict[str, int] = {}
        for c in counted:
            for name, n in c.counters.items():
                total[name] = total.get(name, 0) + n
        backlogs = [c.listen_backlog for c in counted if c.listen_backlog is not None]
        repeats = ", ".join(str(c.repeat + 1) for c in sorted(counted, key=lambda c: c.repeat))
        texts = (server, counted[0].title, status, f"{repeats} of {len(members)}", format_tcp_counters(total),
                 str(min(backlogs)) if backlogs else "n/a")
        rows.append(Row(f"tcp:{server}:{workload}[{params_key}]:{status}", tuple(Cell(t) for t in texts)))
    records = [{"server": c.server, "workload": c.workload, "params_key": c.params_key, "repeat": c.repeat,
                "status": c.status, "counters": dict(c.counters), "listen_backlog": c.listen_backlog}
               for c in cells]
    return Table("tcp", "Kernel TCP counters", COLUMNS, rows, CAPTION, records)
