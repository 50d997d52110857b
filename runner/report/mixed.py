"""The tables of the ``mixed`` workload: per operation kind and per size bucket of the
transfers (runner.report.data.MixedRow; docs/methodology.md, "Mixed sessions"), one row per
server, parameters and operation (or bucket), each figure the median over the done repeats.

Input is plain data; output export-neutral :class:`runner.report.model.Table` objects
(kinds ``mixed_ops`` and ``mixed_buckets``) that every export draws like the others.
"""
from __future__ import annotations

from runner.report.data import CampaignData, MixedRow
from runner.report.fmt import number
from runner.report.model import Cell, Column, Row, Table

_FIGS = (Column("ops", "ops per cell", numeric=True), Column("ops_rate", "ops/s", numeric=True),
         Column("mib_s", "MiB/s", numeric=True), Column("p50", "p50 ms", numeric=True),
         Column("p99", "p99 ms", numeric=True))
OP_COLUMNS = (Column("server", "server"), Column("workload", "workload"), Column("op", "operation"), *_FIGS,
              Column("p999", "p99.9 ms", numeric=True), Column("service_p99", "service p99 ms", numeric=True),
              Column("errors", "errors", numeric=True))
BUCKET_COLUMNS = (Column("server", "server"), Column("workload", "workload"), Column("bucket", "size bucket"),
                  *_FIGS)
OP_CAPTION = ("Median over the repeats. Latency from each operation's intended start (the end of the previous one "
              "plus the think time), so a late client shows in it; service p99 from the actual start. login: "
              "connect, greeting, USER/PASS (FTPS: handshake, PBSZ, PROT), TYPE I. Errors: summed over the repeats.")
BUCKET_CAPTION = ("RETR, STOR and resume (REST + RETR) by file size; their ops and bytes add up to those of the "
                  "three operations. Latency from the intended start.")


def _ms(v: float | None) -> str:
    return "n/a" if v is None else number(v)


def _record(r: MixedRow) -> dict:
    return {"server": r.server, "workload": r.workload, "params_key": r.params_key, "name": r.name,
            "repeats": r.repeats, "ops": r.ops, "ops_rate": r.ops_rate, "mib_s": r.mib_s, "p50_ms": r.p50,
            "p99_ms": r.p99, "p999_ms": r.p999, "service_p99_ms": r.service_p99, "errors": r.errors}


def mixed_tables(data: CampaignData) -> list[Table]:
    """The per-operation table and, when any transfer was made, the per-bucket table of the
    campaign's mixed cells; [] without mixed cells. Records: one dict per row
    (:func:`_record`: server, workload, params_key, name, repeats, ops, ops_rate, mib_s,
    p50_ms, p99_ms, p999_ms, service_p99_ms, errors)."""
    out = []
    for group, kind, title, columns, caption in (
            ("op", "mixed_ops", "Mixed sessions: per operation", OP_COLUMNS, OP_CAPTION),
            ("bucket", "mixed_buckets", "Mixed sessions: per size bucket", BUCKET_COLUMNS, BUCKET_CAPTION)):
        sel = [r for r in data.mixed if r.group == group]
        if not sel:
            continue
        rows = []
        for r in sel:
            texts = [r.server, r.title, r.name, number(r.ops, 0), number(r.ops_rate), number(r.mib_s), _ms(r.p50),
                     _ms(r.p99)]
            if group == "op":
                texts += [_ms(r.p999), _ms(r.service_p99), str(r.errors)]
            rows.append(Row(f"{kind}:{r.server}:{r.workload}[{r.params_key}]:{r.name}", tuple(Cell(t) for t in texts)))
        out.append(Table(kind, title, columns, rows, caption, [_record(r) for r in sel]))
    return out
