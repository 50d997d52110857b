"""A saturation sweep end to end: a campaign of ``retr_sustained`` at 1 and 3 clients
against tpd and pyftpdlib started by the local backend, run by runner.campaign.loop, stored in
the real test PostgreSQL, read back by runner.report.reader and reported as saturation curves
(runner.report.saturation), with the stored HDR histogram readable again."""
from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.load import hdr
from runner.spec.model import parse_spec
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell, Sample


def test_sweep_campaign_to_curves(engine):
    from runner.campaign.loop import run_campaign
    from runner.report.reader import load_campaign
    from runner.report.render import campaign_report
    from runner.report.saturation import curves

    spec = parse_spec({"name": "sweep", "repeats": 1, "backend": "local", "pinning": {},
                       "servers": [{"name": "tpd"}, {"name": "pyftpdlib"}],
                       "workloads": [{"name": "retr_sustained",
                                      "params": {"clients": [1, 3], "file_size": "256K", "duration": 0.5,
                                                 "session": "per_op", "user_rate": "1K", "op_timeout": 20,
                                                 "phase_timeout": 60}}]})
    with Session(engine) as s:
        cid = crud.create_campaign(s, spec=spec, backend="local").id
        s.commit()
    assert run_campaign(engine, cid) == 4
    with Session(engine) as s:
        cells = list(s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.seq)))
        assert s.get(Campaign, cid).status == "done", [(c.server_label, c.error) for c in cells]
        raw = s.scalars(select(Sample.raw).where(Sample.cell_id == cells[-1].id, Sample.metric == "latency",
                                                  Sample.stat == "p50")).one()
        p99 = s.scalars(select(Sample.value).where(Sample.cell_id == cells[-1].id, Sample.metric == "latency",
                                                    Sample.stat == "p99")).one()
        data = load_campaign(s, campaign_id=cid)
        stored = {(c.server_label, c.params_key): {(m, st): (v, r) for m, st, v, r in s.execute(
            select(Sample.metric, Sample.stat, Sample.value, Sample.raw).where(Sample.cell_id == c.id))}
            for c in cells}
    assert raw["unit"] == "us" and raw["digits"] == 3
    assert hdr.percentiles_ms(raw["hdr"])["p99"] == p99  # the stored histogram gives the stored figure
    got = curves(data)
    assert [(c.server, [p.clients for p in c.points]) for c in got] == [("tpd", [1, 3]), ("pyftpdlib", [1, 3])]
    for c in got:
        for p in c.points:
            # the physics of the cell, recomputed from its stored rows: every operation moved one
            # 256 KiB file; the closed loop runs 0.5 s and ends at its last completion, at most
            # one operation (the histogram's longest) after the schedule's end
            rows = next(v for (server, key), v in stored.items()
                        if server == c.server and f"clients={p.clients}" in key)
            ops = hdr.count(rows[("latency", "p50")][1]["hdr"])
            elapsed, moved = rows[("elapsed", "value")][0], rows[("bytes", "value")][0]
            longest_s = hdr.percentiles_ms(rows[("latency", "p50")][1]["hdr"])["max"] / 1000.0
            assert ops >= p.clients and moved == ops * 256 * 1024
            # (less 1 ms: a last completion 8 us before the schedule's end was seen once, and
            # a CI run's 0.49999 s put the throughput 0.002% over moved / 0.5)
            least, most = 0.499, 0.5 + longest_s + 0.05
            assert least <= elapsed <= most
            assert moved / most / 2**20 <= p.throughput <= moved / least / 2**20
            assert abs(p.throughput - moved / elapsed / 2**20) <= 1e-9 * p.throughput
            assert p.p99_ms is not None and 0.0 < p.p99_ms <= longest_s * 1000.0 * 1.001
        # every client moves far more than 1 KiB/s: all of them are "users at rate R"
        assert [p.users_at_rate for p in c.points] == [1, 3] and c.all_at_rate == 3
        assert c.knee in (None, 1, 3)
    text = campaign_report(data, fmt="text")
    assert "Saturation:" in text and "users at rate 1 KiB/s" in text


def test_open_loop_over_two_client_processes(engine):
    """``client_processes: 2``: the open loop's 4 clients run as two ``xferlab loadgen``
    processes of 2 clients and 50/s each; their HDR histograms are added, so the cell counts
    every operation of both (100/s x 1 s = 100) in its stored histogram."""
    from runner.campaign.loop import run_campaign

    spec = parse_spec({"name": "split", "repeats": 1, "backend": "local", "pinning": {}, "client_processes": 2,
                       "warmup": False, "servers": [{"name": "tpd"}],
                       "workloads": [{"name": "retr_sustained",
                                      "params": {"clients": 4, "file_size": "64K", "duration": 1.0, "rate": 100,
                                                 "session": "reuse", "op_timeout": 20, "phase_timeout": 60}}]})
    with Session(engine) as s:
        cid = crud.create_campaign(s, spec=spec, backend="local").id
        s.commit()
    assert run_campaign(engine, cid) == 1
    with Session(engine) as s:
        [cell] = s.scalars(select(Cell).where(Cell.campaign_id == cid)).all()
        assert cell.status == "done", cell.error
        rows = {(m, st): (v, raw) for m, st, v, raw in s.execute(
            select(Sample.metric, Sample.stat, Sample.value, Sample.raw).where(Sample.cell_id == cell.id))}
    assert hdr.count(rows[("latency", "p50")][1]["hdr"]) == 100
    # each process runs 50 operations on its own 1 s schedule (slots 0.02 s apart, the last at
    # 0.98 s) and ends at its last completion, at most the longest corrected latency later; the
    # cell spans the earliest start to the latest end
    longest_s = hdr.percentiles_ms(rows[("latency", "p50")][1]["hdr"])["max"] / 1000.0
    shares = [raw for (m, _), (_, raw) in rows.items() if m == "client_host"]
    for share in shares:
        assert share["ops"] == 50 and 0.98 <= share["elapsed_s"] <= 1.0 + longest_s + 0.05, share
    skew = max(x["started_at"] for x in shares) - min(x["started_at"] for x in shares)
    elapsed = rows[("elapsed", "value")][0]
    assert 0.98 <= elapsed <= 1.0 + longest_s + 0.05 + skew
    assert abs(rows[("ops_rate", "value")][0] - 100 / elapsed) <= 1e-9 * 100 / elapsed
    hosts = [k for k in rows if k[0] == "client_host"]
    assert len({st for _, st in hosts}) >= 2, hosts  # one share per process
