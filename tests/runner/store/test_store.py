"""The store on a real PostgreSQL: migrations, campaign creation, claiming, progress."""
from __future__ import annotations

import os
import threading

from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.orm import Session

from runner.spec.model import parse_spec
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell, Sample

SPEC = {"name": "t", "repeats": 2, "servers": [{"name": "pyftpdlib", "version": "2.2.0"}, {"name": "tpd"}],
        "workloads": [{"name": "login", "params": {"clients": 5}}, {"name": "retr"}]}


def _script_head() -> str:
    """The head revision of the migration scripts (raises if the history has several heads)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from runner.config import get_settings

    migrations = get_settings().migrations_dir

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations))
    head = ScriptDirectory.from_config(cfg).get_current_head()
    assert head, f"no migration scripts in {migrations}"
    return head


def _schema_state(engine) -> dict:
    """What a migration could change: Alembic's current revision and, per table, its
    columns (name, type, nullable, default), primary key, foreign keys, indexes and
    unique constraints, read back from PostgreSQL's catalogue."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as c:
        revision = MigrationContext.configure(c).get_current_revision()
    insp = inspect(engine)
    tables = {}
    for t in sorted(insp.get_table_names()):
        tables[t] = {
            "columns": [(col["name"], str(col["type"]), col["nullable"], col.get("default"))
                        for col in insp.get_columns(t)],
            "pk": insp.get_pk_constraint(t)["constrained_columns"],
            "fks": sorted((fk["name"], tuple(fk["constrained_columns"]), fk["referred_table"])
                          for fk in insp.get_foreign_keys(t)),
            "indexes": sorted((ix["name"], tuple(ix["column_names"]), bool(ix["unique"]))
                              for ix in insp.get_indexes(t)),
            "uniques": sorted((u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(t)),
        }
    return {"revision": revision, "tables": tables}


def test_migrations_create_schema(empty_db_url):
    """get_engine migrates an empty database to the scripts' head."""
    from runner.store.db import get_engine

    bare = create_engine(empty_db_url)
    try:
        assert inspect(bare).get_table_names() == []  # really empty before
    finally:
        bare.dispose()
    engine = get_engine(url=empty_db_url)
    names = set(inspect(engine).get_table_names())
    assert {"campaign", "cell", "sample", "server_build", "environment", "series_point", "cell_profile",
            "noise_calibration", "bisect_job", "alembic_version"} <= names
    with engine.connect() as c:
        version = c.execute(text("select version_num from alembic_version")).scalar()
    # 0002 dashboard indexes, 0003 campaign.owner, 0004 series_point, 0005 cell.server_cpu_source,
    # 0006 cell_profile, 0007 cell.profiled, 0008 noise_calibration, 0009 bisect_job,
    # 0010 cell.server_cpu_window, 0011 link_queue_explicit (data only), 0012 bisect_job's order and cancel
    assert version == _script_head() == "0012"


def test_migrate_is_idempotent(empty_db_url):
    """Migrating a database already at head changes neither the schema nor the data."""
    from runner.store.db import get_engine, migrate

    engine = get_engine(url=empty_db_url)  # first migration, from empty
    with Session(engine) as s:
        camp = crud.create_campaign(s, spec=parse_spec(SPEC), backend="local")
        s.commit()
        cid = camp.id
        cells_before = [(c.id, c.seq, c.status, c.server_label, c.workload)
                        for c in s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.seq))]
    before = _schema_state(engine)
    assert before["revision"] == _script_head()
    assert "campaign" in before["tables"] and before["tables"]["campaign"]["columns"]

    migrate(engine)
    migrate(engine)

    assert _schema_state(engine) == before
    with Session(engine) as s:
        camp = s.get(Campaign, cid)
        assert camp is not None and camp.name == "t" and camp.cells_total == 8
        cells_after = [(c.id, c.seq, c.status, c.server_label, c.workload)
                       for c in s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.seq))]
    assert cells_after == cells_before and len(cells_after) == 8
    with engine.connect() as c:
        assert c.execute(text("select count(*) from alembic_version")).scalar() == 1


def test_cloned_test_database_is_at_head(db_url, empty_db_url):
    """The per-test database (a copy of the session's template) is already at head with
    the same schema a migration from empty gives, and get_engine leaves it unchanged."""
    from runner.store.db import get_engine

    raw = create_engine(db_url)
    try:
        cloned = _schema_state(raw)  # read before get_engine could migrate anything
    finally:
        raw.dispose()
    assert cloned["revision"] == _script_head()
    assert cloned == _schema_state(get_engine(url=empty_db_url))
    assert _schema_state(get_engine(url=db_url)) == cloned
    with get_engine(url=db_url).connect() as c:
        assert c.execute(text("select count(*) from campaign")).scalar() == 0  # isolated: no rows


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
    assert not [t.name for t in threads if t.is_alive()], "a worker thread hung"
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


def test_record_cache_looks_up_once_and_forgets_what_was_rolled_back(engine):
    """RecordCache: one store lookup per build key and environment digest once committed;
    an id made in a transaction that rolled back is not kept (the row does not exist), so
    the next attempt looks up again and gets a row that is in the store."""
    from runner.store.models import Environment, ServerBuild

    cache = crud.RecordCache()
    info = {"name": "vsftpd", "version": "3.0.3", "variant": {"storage": "tmpfs"}, "config_hash": "rc1"}
    with Session(engine) as s:
        lost = cache.build_id(s, info)
        cache.environment_id(s, {"kernel": "rc"}, "c-rc")
        s.rollback()
        cache.rolled_back()
        assert s.get(ServerBuild, lost) is None                       # never committed
    with Session(engine) as s:
        bid = cache.build_id(s, {**info, "startup_s": 0.4})            # same key: same row
        eid = cache.environment_id(s, {"kernel": "rc"}, "c-rc")
        s.commit()
        cache.committed()
        assert cache.lookups == 4
        assert cache.build_id(s, {**info, "startup_s": 0.9}) == bid    # from the cache
        assert cache.environment_id(s, {"kernel": "rc"}, "c-rc") == eid
        assert cache.lookups == 4
        assert s.get(ServerBuild, bid).config_hash == "rc1" and s.get(Environment, eid).env_class == "c-rc"
        other = cache.build_id(s, {**info, "variant": {"storage": "disk"}})  # another variant: another row
        assert other != bid and cache.lookups == 5


def test_workers_leave_foreground_campaigns_alone(engine):
    with Session(engine) as s:
        owned = crud.create_campaign(s, spec=parse_spec(SPEC), backend="local", owner="somehost:1234")
        queued = crud.create_campaign(s, spec=parse_spec(SPEC), backend="local")
        s.commit()
        cell = crud.claim_next_cell(s, worker="w:1")  # a worker: campaign_id not given
        assert cell.campaign_id == queued.id
        mine = crud.claim_next_cell(s, campaign_id=owned.id)  # the owner claims its own
        assert mine.campaign_id == owned.id
