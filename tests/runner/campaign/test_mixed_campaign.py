"""The mixed workload end to end: a campaign against tpd and pyftpdlib started by the local
backend, run by runner.campaign.loop, stored in the test PostgreSQL, read back by
runner.report.reader and rendered as the per-operation and per-bucket tables (text, JSON
round trip); and the same workload split over two client processes, whose per-kind figures
are added exactly."""
from __future__ import annotations

import csv
import io

from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.load import hdr
from runner.spec.model import parse_spec
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell, Sample

MIX = {"retr": 40, "stor": 10, "list": 10, "mlsd": 10, "cwd": 5, "size": 5, "mdtm": 5, "dele": 5, "resume": 5,
       "noop": 5}


def _run(engine, spec_data: dict) -> int:
    from runner.campaign.loop import run_campaign

    spec = parse_spec(spec_data)
    with Session(engine) as s:
        cid = crud.create_campaign(s, spec=spec, backend="local").id
        s.commit()
    run_campaign(engine, cid)
    return cid


def test_mixed_campaign_to_tables(engine):
    from runner.report.json import load_json, render
    from runner.report.reader import load_campaign
    from runner.report.render import campaign_report

    cid = _run(engine, {"name": "mixed", "repeats": 1, "backend": "local", "pinning": {}, "warmup": False,
                        "servers": [{"name": "tpd"}, {"name": "pyftpdlib"}],
                        "workloads": [{"name": "mixed", "params": {
                            "clients": 2, "duration": 1.0, "mix": MIX, "seed": 11, "session_ops": 12,
                            "think": "exponential", "think_ms": 2, "dir_entries": 1000,
                            "sizes": {"kind": "buckets", "buckets": {"4KiB": 70, "256KiB": 30}},
                            "op_timeout": 20, "phase_timeout": 60}}]})
    with Session(engine) as s:
        cells = list(s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.seq)))
        assert s.get(Campaign, cid).status == "done", [(c.server_label, c.error) for c in cells]
        for c in cells:
            rows = {(m, st): (v, raw) for m, st, v, raw in s.execute(
                select(Sample.metric, Sample.stat, Sample.value, Sample.raw).where(Sample.cell_id == c.id))}
            op_counts = {st: v for (m, st), (v, _) in rows.items() if m == "op_count"}
            assert sum(op_counts.values()) == hdr.count(rows[("latency", "p50")][1]["hdr"]) > 20
            assert sum(v for (m, st), (v, _) in rows.items() if m == "bytes" and st != "value") \
                == rows[("bytes", "value")][0]
            assert rows[("listing_names", "mlsd")][0] == 1000
            assert rows[("mixed", "seed")][1] == {"seed": 11}
            assert rows[("sessions", "total")][0] >= 2 and rows[("errors", "total")][0] == 0
        data = load_campaign(s, campaign_id=cid)
    ops = [r for r in data.mixed if r.group == "op"]
    assert {r.server for r in ops} == {"tpd", "pyftpdlib"}
    assert {r.name for r in ops} >= {"login", "retr", "stor", "list", "mlsd"}
    assert all(r.ops > 0 and r.p50 is not None and r.p999 is not None and r.errors == 0 for r in ops)
    # the service time (from the actual start) never exceeds the latency from the intended start
    assert all(r.service_p99 is not None and r.service_p99 <= r.p99 for r in ops)
    buckets = [r for r in data.mixed if r.group == "bucket"]
    assert [r.name for r in buckets if r.server == "tpd"] == ["4K", "256K"]
    for server in ("tpd", "pyftpdlib"):  # the table's bucket ops add up to the transfers' ops
        assert sum(r.ops for r in buckets if r.server == server) == sum(
            r.ops for r in ops if r.server == server and r.name in ("retr", "stor", "resume"))
    text = campaign_report(data, fmt="text")
    assert "Mixed sessions: per operation" in text and "Mixed sessions: per size bucket" in text
    assert "p99.9 ms" in text and "service p99 ms" in text
    assert load_json(render(data)).mixed == data.mixed
    tpd_retr = next(r for r in ops if r.server == "tpd" and r.name == "retr")
    csv_rows = list(csv.DictReader(io.StringIO(campaign_report(data, fmt="csv"))))
    [row] = [r for r in csv_rows if r["server"] == "tpd" and r["metric"] == "mixed_op_ops_rate"
             and r["checkpoint"] == "retr"]
    assert float(row["median"]) == tpd_retr.ops_rate and row["unit"] == "1/s" and row["n"] == "1"
    for fmt in ("md", "html", "rst"):
        assert "Mixed sessions: per size bucket" in campaign_report(data, fmt=fmt)


def test_mixed_over_two_client_processes(engine):
    cid = _run(engine, {"name": "split-mixed", "repeats": 1, "backend": "local", "pinning": {}, "warmup": False,
                        "client_processes": 2, "servers": [{"name": "tpd"}],
                        "workloads": [{"name": "mixed", "params": {
                            "clients": 4, "duration": 1.0, "mix": {"retr": 1, "noop": 1, "list": 1}, "seed": 5,
                            "sizes": {"kind": "fixed", "size": "16K"}, "op_timeout": 20, "phase_timeout": 60}}]})
    with Session(engine) as s:
        [cell] = s.scalars(select(Cell).where(Cell.campaign_id == cid)).all()
        assert cell.status == "done", cell.error
        rows = {(m, st): (v, raw) for m, st, v, raw in s.execute(
            select(Sample.metric, Sample.stat, Sample.value, Sample.raw).where(Sample.cell_id == cell.id))}
    counts = {st: v for (m, st), (v, _) in rows.items() if m == "op_count"}
    assert sum(counts.values()) == hdr.count(rows[("latency", "p50")][1]["hdr"]) > 20
    for op in ("retr", "noop", "list"):  # each kind's histogram holds both processes' operations
        assert hdr.count(rows[("latency", f"{op}:p50")][1]["hdr"]) == counts[op]
    assert rows[("bytes", "retr")][0] == 16384 * counts["retr"]
    assert len({st for (m, st) in rows if m == "client_host"}) == 2
