"""A capacity search run as a real campaign against a capped pyftpdlib
(tests/support/pyftpd_server.py ``cap=``), and what it stored: shared by the known-answer
tests of the sustained and the mixed workloads."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.spec.model import parse_spec
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell, Sample
from tests.support.pyftpd import PASSWORD, USER, start_pyftpd, stop

#: The capacity entry of both tests: each user asks 128 KiB/s, Jain's index at least 0.9.
CAPACITY = {"user_rate": "128K", "min_jain": 0.9, "max_users": 64}


@dataclass
class CapacityRun:
    """A finished search: the campaign and its cells (in order), the answer ``users`` and
    its sample's ``record``, each step cell's pass (1.0) or fail (0.0) by cell id, the
    cells the loop ran and its wall seconds."""

    campaign: Campaign
    cells: list[Cell]
    users: float
    record: dict[str, Any]
    oks: dict[int, float]
    ran: int
    took: float


def run_capacity(engine: Any, tmp_path: Path, cap: int, name: str, workload: dict[str, Any]) -> CapacityRun:
    """Start pyftpdlib capped at ``cap`` bytes/s in ``tmp_path``, run a local campaign
    ``name`` of ``workload`` (a spec workload entry, ``capacity`` added: :data:`CAPACITY`)
    against it, stop the server and read back what was stored."""
    from runner.campaign.loop import run_campaign

    proc, port = start_pyftpd(tmp_path, cap=cap)
    try:
        spec = parse_spec({
            "name": name, "repeats": 1, "backend": "local", "pinning": {}, "warmup": False,
            "servers": [{"name": "external", "external": {"host": "127.0.0.1", "port": port, "user": USER,
                                                          "password": PASSWORD}}],
            "workloads": [{**workload, "capacity": CAPACITY}]})
        with Session(engine) as s:
            cid = crud.create_campaign(s, spec=spec, backend="local").id
            s.commit()
        t0 = time.monotonic()
        ran = run_campaign(engine, cid)
        took = time.monotonic() - t0
    finally:
        stop(proc)
    with Session(engine, expire_on_commit=False) as s:
        cells = list(s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.seq)))
        camp = s.get(Campaign, cid)
        assert camp is not None
        [(users, record)] = s.execute(select(Sample.value, Sample.raw).where(
            Sample.metric == "capacity", Sample.stat == "users",
            Sample.cell_id.in_([c.id for c in cells]))).all()
        oks = dict(s.execute(select(Sample.cell_id, Sample.value).where(
            Sample.metric == "capacity_step", Sample.cell_id.in_([c.id for c in cells]))).all())
        s.expunge_all()
    return CapacityRun(camp, cells, users, record, oks, ran, took)
