"""The capacity search end to end against a server with a known answer: pyftpdlib whose data
sends share one token bucket of R bytes/s (tests/support/pyftpd_server.py ``cap=``), so users
that each ask X bytes/s fit K = floor(R / X) of them. The search (ramp, bisection with
resolution 1, confirmation) runs as a real campaign of open-loop ``retr_sustained`` cells
(runner.campaign.capacity) and must answer K within one step of its resolution."""
from __future__ import annotations

import json

from sqlalchemy import select
from sqlalchemy.orm import Session

from tests.support.capacity_run import run_capacity

X = 128 * 1024          # each user's demand and floor, bytes/s
K = 5                   # the answer
R = int((K + 0.6) * X)  # the server's total: 5.6 users' worth


def test_capacity_search_finds_the_cap(engine, tmp_path):
    run = run_capacity(engine, tmp_path, R, "capacity-known", {
        "name": "retr_sustained",
        "params": {"file_size": "32K", "duration": 2.0, "session": "per_op", "op_timeout": 20, "phase_timeout": 60}})
    camp, cells, users, record, oks, ran, took = (run.campaign, run.cells, run.users, run.record, run.oks,
                                                  run.ran, run.took)
    cid = camp.id
    steps = [(c.params["clients"], oks.get(c.id)) for c in cells]
    assert camp.status == "done" and camp.cells_total == len(cells) == ran, steps
    assert K - 1 <= users <= K + 1, (users, steps, record["steps"])
    # the ramp doubles from 1 until a step fails, then bisects: the first steps are 1, 2, 4, 8
    assert [n for n, _ in steps[:4]] == [1, 2, 4, 8], steps
    assert steps[3][1] == 0.0  # 8 users ask 8 X of a 5.6 X server
    assert record["users"] == users and record["hi"] == users + 1
    assert record["reason"] == "server", record["reason_text"]  # a bucket: no CPU, drop, link or client
    # the confirmation: the answer ran twice and passed twice
    assert [ok for n, ok in steps if n == users] == [1.0, 1.0], steps
    # the measured per-user rates agree with the bucket: at N = 8 the slowest user got at most R / 8
    at8 = next(st for st in record["steps"] if st["clients"] == 8)
    assert at8["min_rate"] * (1 << 20) <= 1.1 * R / 8, at8
    assert at8["throughput"] * (1 << 20) <= 1.15 * R, at8
    assert took < 240, took
    # the reports: the headline in the campaign table's caption, the capacity tables, the JSON document
    from runner.report.reader import load_campaign
    from runner.report.render import campaign_report

    with Session(engine) as s:
        data = load_campaign(s, campaign_id=cid)
    [res] = data.capacity
    assert (res.users, res.workload) == (users, "retr_sustained") and "clients=" not in res.params_key
    text = campaign_report(data, fmt="text")
    assert "Capacity: sustainable users at the service level" in text and "Capacity steps:" in text
    assert f"{users:g} users at each user >= 128 KiB/s, Jain >= 0.9; broke at {users + 1:g}" in text
    doc = json.loads(campaign_report(data, fmt="json"))
    assert doc["capacity"][0]["users"] == users and len(doc["capacity"][0]["record"]["steps"]) == len(cells)
    assert "Sustainable users" in campaign_report(data, fmt="html")
    # history: one point of the capacity series, keyed without clients and rate; rebuilt alike
    from runner.history import list_series, series_overview
    from runner.store.models import SeriesPoint
    from runner.store.points import rebuild_points

    with Session(engine) as s:
        def points():
            return [(p.params_key, list(p.samples)) for p in s.scalars(
                select(SeriesPoint).where(SeriesPoint.campaign_id == cid, SeriesPoint.metric == "capacity"))]
        stored = points()
        rebuild_points(s)
        assert points() == stored == [(res.params_key, [users])], stored
        [ser] = [d for d in list_series(s) if d["metric"] == "capacity"]
        assert ser["unit"] == "users" and ser["benchmark"].endswith(", sustainable users"), ser
        assert [d["metric"] for d in series_overview(s, figure="capacity")] == ["capacity"]
        s.rollback()
    print(f"capacity {users:g} users; steps (N, ok) {steps}; {record['reason_text']}; {took:.1f} s")
