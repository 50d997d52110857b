"""The capacity search with the ``mixed`` workload's open loop against a server with a known
answer: pyftpdlib whose data sends share one token bucket of R bytes/s
(tests/support/pyftpd_server.py ``cap=``), so users that each ask X bytes/s of RETR payload
fit K = floor(R / X) of them. The sessions also run SIZE and CWD (no payload, outside the
bucket); each user is paced by its own schedule (runner.load.ftp.mixed, open loop) and the
search (runner.campaign.capacity) must answer K within one user."""
from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.catalogue.mixed import OpMix, SizeDist, mean_op_bytes
from runner.catalogue.workloads import WorkloadParams
from runner.spec.capacity import CapacitySpec, op_bytes
from runner.spec.model import parse_spec
from runner.spec.workloads import capacity_ready
from runner.store.models import Sample
from tests.support.capacity_run import run_capacity

X = 128 * 1024          # each user's demand and floor, bytes/s
K = 5                   # the answer
R = int((K + 0.6) * X)  # the server's total: 5.6 users' worth
MIX = {"retr": 70, "size": 20, "cwd": 10}


def test_mean_op_bytes_against_hand_figures():
    # 60% 4 KiB, 30% 1 MiB, 10% 16 MiB: E[size] = 2457.6 + 314572.8 + 1677721.6 = 1994752 B
    sizes = SizeDist(kind="buckets", buckets={"4K": 60, "1M": 30, "16M": 10})
    mix = OpMix(retr=45, stor=15, size=15, list=10, cwd=5, dele=10)
    assert mean_op_bytes(mix, sizes, 1) == pytest.approx(0.6 * 1994752)
    # resume reads size - k, k uniform in 1..size-1: mean size / 2
    assert mean_op_bytes(OpMix(resume=1), SizeDist(size=1000), 1) == pytest.approx(500)
    assert mean_op_bytes(OpMix(list=1, cwd=1), SizeDist(size=1000), 1) == 0
    p = WorkloadParams(mix=OpMix(**MIX), sizes=SizeDist(size="16K"), duration=3)
    assert op_bytes("mixed", p) == pytest.approx(0.7 * 16384)
    step = CapacitySpec(user_rate="128K").step_params(p, 6, "mixed")
    assert step.rate == pytest.approx(6 * X / (0.7 * 16384)) and step.user_rate == X and step.clients == 6


def test_busier_direction_of_a_mixed_phase():
    """Downloads (RETR, resumed RETR, listings) against uploads (STOR), from the per-operation
    throughput rows; the phase's total (stat ``value``) is not a direction."""
    from runner.campaign.capacity import busier_direction

    v = {("throughput", "value"): 15.36, ("throughput", "retr"): 8.0, ("throughput", "resume"): 1.5,
         ("throughput", "list"): 0.06, ("throughput", "stor"): 5.8, ("latency", "p99"): 3.0}
    assert busier_direction(v) == pytest.approx(9.56)
    assert busier_direction({**v, ("throughput", "stor"): 12.0}) == pytest.approx(12.0)
    assert busier_direction({("throughput", "value"): 11.2}) is None  # one way only: the total is it


def test_capacity_ready_and_refusals():
    assert capacity_ready("mixed") and capacity_ready("retr_sustained") and not capacity_ready("login")
    with pytest.raises(ValueError, match="moves no payload"):
        parse_spec({"name": "x", "servers": [{"name": "vsftpd"}], "workloads": [
            {"name": "mixed", "params": {"mix": {"list": 1}}, "capacity": {"user_rate": "128K"}}]})
    with pytest.raises(ValueError, match="bytes per operation"):
        parse_spec({"name": "x", "servers": [{"name": "vsftpd"}], "workloads": [
            {"name": "mixed", "params": {"mix": {"retr": 1}, "sizes": {"size": "16M"}, "duration": 2},
             "capacity": {"user_rate": "1M"}}]})


def test_mixed_capacity_search_finds_the_cap(engine, tmp_path):
    run = run_capacity(engine, tmp_path, R, "capacity-mixed", {
        "name": "mixed",
        "params": {"mix": MIX, "sizes": {"kind": "fixed", "size": "16K"}, "duration": 3.0, "session_ops": 10,
                   "dir_entries": 10, "op_timeout": 20, "phase_timeout": 60}})
    camp, cells, users, record, oks, ran, took = (run.campaign, run.cells, run.users, run.record, run.oks,
                                                  run.ran, run.took)
    with Session(engine) as s:
        ops = {c.id: v for c, v in ((c, s.scalar(select(Sample.value).where(
            Sample.cell_id == c.id, Sample.metric == "ops_rate", Sample.stat == "value"))) for c in cells)}
    steps = [(c.params["clients"], oks.get(c.id)) for c in cells]
    assert camp.status == "done" and camp.cells_total == len(cells) == ran, steps
    assert all(c.params["rate"] and c.params["user_rate"] == X for c in cells)
    assert K - 1 <= users <= K + 1, (users, steps, record["steps"])
    assert [n for n, _ in steps[:4]] == [1, 2, 4, 8], steps
    assert steps[3][1] == 0.0  # 8 users ask 8 X of a 5.6 X server
    assert record["hi"] == users + 1 and record["reason"] == "server", record
    # the open loop offered what it was asked: at N = 4 (within the cap) the achieved
    # operations/s is the offered rate 4 X / (0.7 x 16 KiB) within 15% (logins add one per 10 ops)
    at4 = next(c for c in cells if c.params["clients"] == 4)
    offered = 4 * X / (0.7 * 16384) * 1.1
    assert ops[at4.id] is not None and 0.85 * offered <= ops[at4.id] <= 1.15 * offered, (ops[at4.id], offered)
    # at N = 8 the slowest user got at most its share of the bucket, and all together at most R
    at8 = next(st for st in record["steps"] if st["clients"] == 8)
    assert at8["min_rate"] * (1 << 20) <= 1.1 * R / 8, at8
    assert at8["throughput"] * (1 << 20) <= 1.15 * R, at8
    assert took < 300, took
    print(f"mixed capacity {users:g} users; steps {steps}; {record['reason_text']}; {took:.1f} s")
