"""store_retry on real connection failures (a PostgreSQL address nothing listens on);
the restart of a real PostgreSQL mid-campaign is tests/integration/test_pg_restart.py."""
from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

from runner.store.retry import StoreUnavailable, is_connection_error, store_retry
from tests.support.ports import free_port


class _Msgs:
    def __init__(self):
        self.lines: list[str] = []

    def message(self, text: str) -> None:
        self.lines.append(text)


@pytest.fixture
def dead_session():
    """A Session on a PostgreSQL URL whose port nothing listens on (connection refused)."""
    port = free_port()  # nothing listens there: refused
    eng = create_engine(f"postgresql+psycopg://x:y@127.0.0.1:{port}/z", connect_args={"connect_timeout": 5})
    with Session(eng) as session:
        yield session
    eng.dispose()


def test_gives_up_after_max_wait_with_backoff(dead_session):
    slept: list[float] = []
    msgs = _Msgs()
    with pytest.raises(StoreUnavailable) as ei:
        store_retry(dead_session, lambda: dead_session.execute(text("select 1")), "storing cell 7", msgs,
                    max_wait=10, sleep=slept.append)
    assert slept == [0.5, 1.0, 2.0, 4.0]  # doubling; the next wait (8 s) would pass 10 s
    assert "storing cell 7" in str(ei.value) and "xferlab resume" in str(ei.value)
    assert "OperationalError" in str(ei.value) or "Connection refused" in str(ei.value)
    assert len(msgs.lines) == 4 and all("store unreachable while storing cell 7" in m for m in msgs.lines)
    assert is_connection_error(ei.value.__cause__)


def test_recovers_and_says_so(dead_session, engine):
    calls = []
    msgs = _Msgs()

    def step():
        calls.append(1)
        if len(calls) < 3:  # a real connection failure twice, then the real database
            dead_session.execute(text("select 1"))
        with engine.connect() as c:
            return c.execute(text("select 41 + 1")).scalar()

    assert store_retry(dead_session, step, "claiming a cell", msgs, sleep=lambda s: None) == 42
    assert len(calls) == 3
    assert msgs.lines[-1].startswith("store reachable again: claiming a cell done after 2 failed tries")


def test_other_errors_are_not_retried(engine):
    calls = []

    def step():
        calls.append(1)
        with engine.connect() as c:
            c.execute(text("select * from no_such_table"))

    with Session(engine) as session, pytest.raises(Exception) as ei:
        store_retry(session, step, "x", sleep=lambda s: None)
    assert not isinstance(ei.value, StoreUnavailable) and len(calls) == 1
    assert not is_connection_error(ei.value)
