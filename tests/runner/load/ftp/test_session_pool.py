"""Sessions kept across the cells of a server life (runner.load.ftp.session_pool) against a
real pyftpdlib server that logs every login itself: the second cell does not log in
again, a session the server ended is replaced, healthy sessions only are kept."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.load.ftp.session_pool import SessionPool, pooled
from runner.load.ftp.workloads import fill_sync, run_workload_sync
from runner.load.target import Target
from tests.support.fakeftp import FakeFTP
from tests.support.pyftpd import PASSWORD, USER, start_pyftpd, stop

pytestmark = pytest.mark.timeout(90)
KIB, MIB = 1 << 10, 1 << 20
N = 12


def _params(**kw) -> WorkloadParams:
    base = dict(clients=N, file_size=256 * KIB, transfer_size=1 * MIB, duration=0.1, op_timeout=10,
                phase_timeout=30, login_mode="window")
    base.update(kw)
    return WorkloadParams(**base)


def _logins(log: Path) -> list[str]:
    """The server's own record: one line per successful login."""
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def logged_server(tmp_path):
    """A pyftpdlib server writing its logins to a file: (target, the file, start(idle=...))."""
    home = tmp_path / "home"
    home.mkdir()
    log = tmp_path / "logins.txt"
    procs = []

    def start(idle: float | None = None) -> Target:
        proc, port = start_pyftpd(home, login_log=log, idle=idle)
        procs.append(proc)
        return Target(host="127.0.0.1", port=port, user=USER, password=PASSWORD, root=home)

    yield start, log
    for p in procs:
        stop(p)


def _cell(workload: str, target: Target, pool: SessionPool, params: WorkloadParams):
    """What runner.cell.local does for a pooled row: fill the pool, then run the phase on it."""
    held = fill_sync(workload, target, params, pool)
    return held, run_workload_sync(workload, target, params, pool=pool)


@pytest.mark.parametrize("workload", ["retr_idle", "stor_concurrent"])
def test_the_second_cell_of_a_server_life_does_not_log_in_again(logged_server, workload):
    start, log = logged_server
    target = start()
    p = _params()
    measured_own = 1 if workload.endswith("_idle") else 0  # the single stream's own session
    pool = SessionPool(target)
    try:
        held, r1 = _cell(workload, target, pool, p)
        assert held == N and pool.logged_in == N and pool.reused == 0
        assert r1.errors == {} and r1.ops >= 1
        assert r1.greeted_sessions == N + measured_own  # the fill's logins count as the phase's
        after_first = len(_logins(log))
        assert after_first == N + measured_own
        held, r2 = _cell(workload, target, pool, p)
        assert r2.errors == {} and r2.ops >= 1 and r2.greeted_sessions == measured_own
        assert held == N and pool.reused == N and pool.logged_in == 0 and pool.dropped == 0
        # the server saw no login of the kept sessions again: only the measured stream's own
        assert len(_logins(log)) == after_first + measured_own
        assert any(n.startswith(f"sessions: {N} of {N} kept") for n in r2.notes), r2.notes
        assert len(pool) == N  # handed back again
    finally:
        pool.close()
    assert len(pool) == 0


def test_a_session_the_server_ended_is_replaced(logged_server):
    """The server ends idle control connections after 1 s: every kept session is dead by
    the next cell, found so by NOOP, closed, and logged in anew (the server counts them)."""
    start, log = logged_server
    target = start(idle=1.0)
    p = _params()
    pool = SessionPool(target)
    try:
        _cell("retr_concurrent", target, pool, p)
        first = len(_logins(log))
        assert first == N and len(pool) == N
        time.sleep(2.0)
        held, r = _cell("retr_concurrent", target, pool, p)
        assert held == N and pool.dropped == N and pool.reused == 0 and pool.logged_in == N
        assert r.errors == {} and r.ops == N
        assert len(_logins(log)) == first + N
    finally:
        pool.close()


def test_only_healthy_sessions_are_kept_and_unpooled_rows_log_in_their_own(logged_server, tmp_path):
    """A concurrent RETR of a file that is not there fails on every session: none is kept.
    The login and QUIT rows measure their sessions' logins and ends: no pool use."""
    start, log = logged_server
    target = start()
    assert not pooled("login") and not pooled("quit") and pooled("retr_idle")
    pool = SessionPool(target)
    try:
        fill_sync("retr_concurrent", target, _params(), pool)
        missing = Target(host=target.host, port=target.port, user=USER, password=PASSWORD,
                         root=tmp_path / "nowhere")  # the fixture goes to a folder the server does not serve
        (tmp_path / "nowhere").mkdir()
        r = run_workload_sync("retr_concurrent", missing, _params(), pool=pool)
        assert r.errors and r.ops == 0
        assert len(pool) == 0
        before = len(_logins(log))
        r = run_workload_sync("login", target, _params(), pool=pool)
        assert r.ops == N and len(_logins(log)) == before + N and len(pool) == 0
    finally:
        pool.close()


#: How long the lingering test server keeps a connection open after its 221 to QUIT
LINGER_S = 1.5


@pytest.fixture
def lingering_server():
    """The scripted FTP peer (tests.support.fakeftp) on loopback, on an event loop of its own
    thread (the pool runs its own), keeping each connection LINGER_S open after its 221 to
    QUIT (as a server whose session processes exit slowly): (target, the peer)."""
    import asyncio
    import threading

    box: dict = {}
    ready = threading.Event()

    def serve():
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        peer = FakeFTP(quit_linger=LINGER_S)
        loop.run_until_complete(peer.__aenter__())
        box.update(loop=loop, peer=peer)
        ready.set()
        loop.run_forever()
        loop.run_until_complete(peer.__aexit__(None, None, None))
        pending = asyncio.all_tasks(loop)  # sessions still lingering: ended with the peer
        for task in pending:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    assert ready.wait(10)
    yield Target(host="127.0.0.1", port=box["peer"].port, user=USER, password=PASSWORD), box["peer"]
    box["loop"].call_soon_threadsafe(box["loop"].stop)
    t.join(10)


@pytest.mark.parametrize("wait_close", [True, False])
def test_ending_kept_sessions_waits_for_the_servers_close_unless_it_stops_next(lingering_server, wait_close):
    """Sessions ended before a later row are ended when the server has closed each one (its
    session processes gone before it is measured again); ended because the server stops
    next, the 221 is enough. Both send every kept session its QUIT."""
    target, peer = lingering_server
    pool = SessionPool(target)
    fill_sync("retr_idle", target, _params(clients=8), pool)
    assert len(pool) == 8
    t0 = time.monotonic()
    pool.close(wait_close=wait_close)
    took = time.monotonic() - t0
    assert peer.quits == 8
    if wait_close:
        assert LINGER_S <= took < LINGER_S + 2.0, took
    else:
        assert took < LINGER_S / 2, took
