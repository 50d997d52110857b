"""Alembic environment for xferlab: runs against the connection the runner passes in
(``config.attributes["connection"]``) or, from the alembic CLI, against
``XFERLAB_DATABASE_URL`` / the embedded PostgreSQL."""
from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from runner.store.models import Base

target_metadata = Base.metadata


def run_migrations_online() -> None:
    """Run migrations on the given connection, or on a fresh engine from the settings."""
    connection = context.config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    from runner.store.db import database_url

    engine = create_engine(database_url())
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, compare_type=True)
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
