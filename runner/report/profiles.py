"""The "Server CPU profiles" table and the text of one profile's figures.

Input is plain data (runner.report.data.CellProfileData); output an export-neutral
:class:`runner.report.model.Table` (kind ``profiles``) that every export draws, and the
plain-text syscall table ``xferlab profile`` writes beside the flame graph.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runner.report.data import CampaignData, CellProfileData
from runner.report.model import Cell, Column, Row, Table

COLUMNS = (Column("server", "server"), Column("workload", "workload"), Column("repeat", "repeat", numeric=True),
           Column("profiler", "profiler"), Column("rate", "rate", numeric=True),
           Column("on_cpu", "on-CPU s", numeric=True), Column("off_cpu", "off-CPU s", numeric=True),
           Column("syscalls", "top system calls"))
CAPTION = ("The server's whole process tree sampled over the measured phase; on-CPU seconds are samples / rate. "
           "Flame graphs: `xferlab profile CELL_ID`, or the dashboard's campaign page.")


def profiler_text(p: CellProfileData) -> str:
    """``"perf 6.1.187"``: the profiler and its version."""
    return f"{p.profiler} {p.profiler_version}".strip()


def top_syscalls(syscalls: Sequence[Mapping[str, Any]], n: int = 3) -> str:
    """The first ``n`` syscalls as ``"sendfile 300 (0.412 s), epoll_wait 310"``, or ``-``."""
    parts = []
    for r in list(syscalls)[:n]:
        t = r.get("total_s")
        parts.append(f"{r['name']} {r['count']}" + (f" ({t:.3f} s)" if t is not None else ""))
    return ", ".join(parts) or "-"


def profile_table(data: CampaignData) -> Table | None:
    """One row per profiled cell, in cell order: server, workload title, repeat (1 =
    first), profiler and version, rate (Hz), on-CPU and off-CPU seconds (``n/a`` when not
    measured), the three top syscalls. None when no cell was profiled. Records:
    ``{"cell_id", "server", "workload", "params_key", "repeat", "profiler",
    "profiler_version", "rate_hz", "on_cpu_s", "off_cpu_s"}``."""
    if not data.profiles:
        return None
    rows, records = [], []
    for p in data.profiles:
        off = "n/a" if p.off_cpu_s is None else f"{p.off_cpu_s:.3f}"
        texts = (p.server, p.title, str(p.repeat + 1), profiler_text(p), f"{p.rate_hz} Hz", f"{p.on_cpu_s:.3f}",
                 off, top_syscalls(p.syscalls))
        rows.append(Row(f"profile:{p.cell_id}", tuple(Cell(t) for t in texts)))
        records.append({"cell_id": p.cell_id, "server": p.server, "workload": p.workload, "params_key": p.params_key,
                        "repeat": p.repeat, "profiler": p.profiler, "profiler_version": p.profiler_version,
                        "rate_hz": p.rate_hz, "on_cpu_s": p.on_cpu_s, "off_cpu_s": p.off_cpu_s})
    return Table("profiles", "Server CPU profiles", COLUMNS, rows, CAPTION, records)


def syscall_text(p: CellProfileData) -> str:
    """The profile's figures as plain text: profiler, rate, duration, the on/off-CPU split,
    the notes, then one line per syscall (name, count, seconds, errors; ``-`` when unknown),
    ending with a newline."""
    off = "not measured" if p.off_cpu_s is None else f"{p.off_cpu_s:.3f} s"
    lines = [f"cell {p.cell_id}: {p.server} · {p.title} · repeat {p.repeat + 1} ({p.status})",
             f"profiler: {profiler_text(p)} at {p.rate_hz} Hz over {p.duration_s:.3f} s",
             f"on-CPU: {p.on_cpu_s:.3f} s; off-CPU: {off}"]
    lines += [f"note: {n}" for n in p.notes]
    lines.append("")
    lines.append(f"{'syscall':<24} {'count':>10} {'seconds':>12} {'errors':>8}")
    for r in p.syscalls:
        t, e = r.get("total_s"), r.get("errors")
        lines.append(f"{r['name']:<24} {r['count']:>10} {'-' if t is None else f'{t:.6f}':>12} "
                     f"{'-' if e is None else e:>8}")
    if not p.syscalls:
        lines.append("(no syscall counts stored)")
    return "\n".join(lines) + "\n"
