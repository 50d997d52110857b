"""The store on a real PostgreSQL: migrations, campaign creation, claiming, progress."""
from __future__ import annotations

import os
import threading

from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session

from runner.spec import parse_spec
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell, Sample

SPEC = {"name": "t", "repeats": 2, "servers": [{"name": "pyftpdlib", "version": "2.2.0"}, {"name": "tpd"}],
        "workloads": [{"name": "login", "params": {"clients": 5}}, {"name": "retr"}]}


def test_migrations_create_schema(engine):
    names = set(inspect(engine).get_table_names())
    assert {"campaign", "cell", "sample", "server_build", "environment", "alembic_version"} <= names
    with engine.connect() as c:
        assert c.execute(text("select version_num from alembic_version")).scalar() == "0003"  # head: 0002 dashboard indexes, 0003 campaign.owner


def test_migrate_is_idempotent(engine):
    from runner.store.db import migrate

    migrate(engine)
    migrate(engine)


def test_create_and_claim(engine):
    with Session(engine) as s:
        camp = crud.create_campaign(s, spec=parse_spec(SPEC), backend="local")
        s.commit()
        assert camp.cells_total == 8
        c1 = crud.claim_next_cell(s, campaign_id=camp.id)
        assert c1.seq == 0 and c1.status == "running" and c1.worker.endswith(f":{os.getpid()}")
        assert s.get(Campaign, camp.id).status == "running"
        crud.finish_cell(s, cell=c1, status="done",
                         samples=[Sample(metric="elapsed", stat="value", value=0.5, unit="s")])
        camp = s.get(Campaign, camp.id)
        assert camp.cells_done == 1 and camp.status == "running"


def test_skip_locked_two_workers_never_share_a_cell(engine):
    with Session(engine) as s:
        camp = crud.create_campaign(s, spec=parse_spec(SPEC), backend="local")
        s.commit()
        cid = camp.id
    claimed: list[int] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        with Session(engine) as s:
            for _ in range(20):
                cell = crud.claim_next_cell(s, campaign_id=cid, worker=f"w{n}:1")
                if cell is None:
                    return
                with lock:
                    claimed.append(cell.id)
                crud.finish_cell(s, cell=cell, status="done")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(claimed) == 8 and len(set(claimed)) == 8
    with Session(engine) as s:
        camp = s.get(Campaign, cid)
        assert camp.status == "done" and camp.cells_done == 8 and camp.finished_at is not None


def test_cancel(engine):
    with Session(engine) as s:
        camp = crud.create_campaign(s, spec=parse_spec(SPEC), backend="local")
        s.commit()
        crud.cancel_campaign(s, campaign_id=camp.id)
        assert crud.claim_next_cell(s, campaign_id=camp.id) is None
        statuses = set(s.scalars(select(Cell.status).where(Cell.campaign_id == camp.id)))
        assert statuses == {"cancelled"}


def test_reap_dead_worker(engine):
    with Session(engine) as s:
        camp = crud.create_campaign(s, spec=parse_spec(SPEC), backend="local")
        s.commit()
        import socket

        cell = crud.claim_next_cell(s, campaign_id=camp.id, worker=f"{socket.gethostname()}:999999")
        assert crud.reap_dead_workers(s) == 1
        s.refresh(cell)
        assert cell.status == "failed" and "died" in cell.error
        assert s.get(Campaign, camp.id).status == "interrupted"


def test_builds_and_environments_deduplicated(engine):
    with Session(engine) as s:
        b1 = crud.get_or_create_build(s, info={"name": "pyftpdlib", "version": "2.2.0", "variant": {},
                                               "config_hash": "abc"})
        b2 = crud.get_or_create_build(s, info={"name": "pyftpdlib", "version": "2.2.0", "variant": {},
                                               "config_hash": "abc"})
        e1 = crud.get_or_create_environment(s, data={"kernel": "x"}, env_class="c1")
        e2 = crud.get_or_create_environment(s, data={"kernel": "x"}, env_class="c1")
        assert b1.id == b2.id and e1.id == e2.id


def test_workers_leave_foreground_campaigns_alone(engine):
    with Session(engine) as s:
        owned = crud.create_campaign(s, spec=parse_spec(SPEC), backend="local", owner="somehost:1234")
        queued = crud.create_campaign(s, spec=parse_spec(SPEC), backend="local")
        s.commit()
        cell = crud.claim_next_cell(s, worker="w:1")  # a worker: campaign_id not given
        assert cell.campaign_id == queued.id
        mine = crud.claim_next_cell(s, campaign_id=owned.id)  # the owner claims its own
        assert mine.campaign_id == owned.id
