"""The eight classic-suite workloads against a real pyftpdlib server (small params),
plus phase bounds and failure handling (silent server, refused connection)."""
from __future__ import annotations

import asyncio
import os
import resource
import threading
import time

import pytest

from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.cell.samples import headline, phase_samples
from runner.load.base import MEASURE_BEGIN, MEASURE_END
from runner.load.ftp.fixtures import server_name
from runner.load.ftp.workloads import LoadError, run_workload, run_workload_sync
from runner.load.target import Target
from tests.support.fakeftp import FakeFTP
from tests.support.pyftpd import PASSWORD, USER
from tests.support.skips import lacks_if

pytestmark = pytest.mark.timeout(60)
KIB, MIB = 1 << 10, 1 << 20


def small(**kw) -> WorkloadParams:
    base = dict(clients=20, file_size=256 * KIB, transfer_size=4 * MIB, duration=0.2,
                op_timeout=10, phase_timeout=30)
    base.update(kw)
    return WorkloadParams(**base)


def run(workload, target, params):
    cps: list[str] = []
    msgs: list[str] = []
    r = run_workload_sync(workload, target, params, checkpoint=cps.append, progress=msgs.append)
    return r, cps, msgs


def run_measured(workload, target, params):
    """``run`` plus what bounds the phase's client CPU from outside: the CPU seconds this
    process used over the whole call (getrusage, microseconds) and the call's wall time."""
    ru0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    r, cps, msgs = run(workload, target, params)
    ru1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - w0
    call_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return r, cps, msgs, call_cpu, wall


def assert_client_cpu_within(r, call_cpu: float, wall: float) -> None:
    """The phase's client CPU (os.times() delta, counted in clock ticks of 1/SC_CLK_TCK s,
    user and system each truncated: two ticks of slack) is part of the call's CPU (a
    cumulative figure instead of a delta exceeds it) and at most wall time x usable cores."""
    slack = 2 / os.sysconf("SC_CLK_TCK")
    cpu = r.client_cpu_user_s + r.client_cpu_system_s
    assert r.client_cpu_user_s >= 0 and r.client_cpu_system_s >= 0
    assert cpu <= call_cpu + slack, f"phase CPU {cpu:.3f} s > CPU of the whole call {call_cpu:.3f} s"
    assert cpu <= wall * len(os.sched_getaffinity(0)) + slack, f"phase CPU {cpu:.3f} s in {wall:.3f} s wall"


@pytest.mark.parametrize("workload", ["stor", "retr"])
@pytest.mark.parametrize("passive", ["pasv", "epsv"])
def test_single_stream(target, workload, passive):
    p = small(passive=passive)
    r, cps, msgs, call_cpu, wall = run_measured(workload, target, p)
    assert r.workload == workload and r.errors == {}
    assert r.ops >= 1 and r.bytes == r.ops * p.transfer_size
    assert len(r.latencies_ms) == r.ops
    # repeated until duration: the measured spans add up to at least ~duration
    assert r.elapsed_s >= p.duration * 0.9 or r.ops == 1
    assert r.throughput_mib_s > 10
    # the measured span's marks come first, "loaded" (the untimed peak) after it
    assert cps == [MEASURE_BEGIN, MEASURE_END, "loaded"] and msgs
    assert_client_cpu_within(r, call_cpu, wall)


def test_single_stream_stor_starts_its_sender_thread_before_the_span(target):
    """The single-stream STOR sends on the loop's worker thread; the first
    ``asyncio.to_thread`` of a loop imports and clones (9.5 ms under strace), so that
    thread must be running when the measured span begins: no thread starts inside it."""
    seen: dict[str, set[int]] = {}

    def checkpoint(name: str) -> None:
        if name in (MEASURE_BEGIN, MEASURE_END):
            seen[name] = {t.ident for t in threading.enumerate()}

    r = run_workload_sync("stor", target, small(), checkpoint=checkpoint)
    assert r.errors == {} and r.ops >= 1
    assert seen[MEASURE_END] <= seen[MEASURE_BEGIN], "a thread started inside the measured span"


@pytest.mark.parametrize("workload", ["stor", "retr"])
def test_client_cpu_covers_the_transfers(target, workload):
    """A phase of many small transfers costs the client real CPU (about 0.7 ms per
    64 KiB transfer here: commands, a data connection, the bytes), so hundreds of them
    are far above the two-tick resolution of os.times(); and it stays within bounds."""
    r, _, _, call_cpu, wall = run_measured(workload, target, small(duration=1.0, transfer_size=64 * KIB))
    assert r.errors == {} and r.ops >= 10 and r.bytes == r.ops * 64 * KIB
    cpu = r.client_cpu_user_s + r.client_cpu_system_s
    assert cpu > 0, f"no client CPU for {r.ops} transfers ({r.bytes} bytes)"
    assert_client_cpu_within(r, call_cpu, wall)


def test_retr_fixture_uploaded_when_root_unknown(remote_target, ftp_home):
    size = 3 * MIB + 5  # a size no other test uses
    r, _, _ = run("retr", remote_target, small(transfer_size=size))
    assert r.errors == {} and r.bytes == r.ops * size
    assert (ftp_home / server_name(size)).stat().st_size == size


def test_window_login_keeps_at_most_the_window_in_flight(target, monkeypatch):
    from runner.load.ftp import phase

    monkeypatch.setattr(phase, "LOGIN_WINDOW", 3)
    inflight = [0, 0]  # now, most seen
    real = phase.Phase.login_one

    async def counted(self, binary):
        inflight[0] += 1
        inflight[1] = max(inflight[1], inflight[0])
        try:
            return await real(self, binary)
        finally:
            inflight[0] -= 1

    monkeypatch.setattr(phase.Phase, "login_one", counted)
    r, _, _ = run("quit", target, small(clients=12, login_mode="window"))
    assert r.errors == {} and r.ops == 12           # every session logged in, then QUIT measured
    assert inflight[1] == 3                          # never more than the window, and the window filled


@pytest.mark.parametrize("mode", ["concurrent", "sequential", "window"])
def test_login(target, mode):
    r, cps, _ = run("login", target, small(login_mode=mode))
    assert r.errors == {} and r.ops == 20 and len(r.latencies_ms) == 20
    assert f"login mode: {mode}" in r.notes
    assert cps == [MEASURE_BEGIN, MEASURE_END, "loaded"]
    assert r.elapsed_s > 0
    if mode == "sequential":  # one after another: the phase is at least the sum of latencies
        assert r.elapsed_s * 1000 >= sum(r.latencies_ms) * 0.99


def test_login_sessions_stay_open_until_loaded(target):
    import psutil

    seen: list[int] = []

    def cp(name):
        if name != "loaded":
            return
        me = psutil.Process()
        seen.append(sum(1 for c in me.net_connections("tcp")
                        if c.raddr and c.raddr.port == target.port and c.status == "ESTABLISHED"))

    run_workload_sync("login", target, small(clients=15), checkpoint=cp)
    assert seen == [15]


@pytest.mark.parametrize("workload", ["stor_idle", "retr_idle"])
def test_idle(target, workload):
    import psutil

    seen: list[int] = []

    def cp(name):
        if name != "loaded":
            return
        seen.append(sum(1 for c in psutil.Process().net_connections("tcp")
                        if c.raddr and c.raddr.port == target.port and c.status == "ESTABLISHED"))

    p = small()
    r = run_workload_sync(workload, target, p, checkpoint=cp)
    assert r.errors == {} and r.ops >= 1 and r.bytes == r.ops * p.transfer_size
    assert seen == [21]  # 20 idle + the transferring session, at "loaded"


@pytest.mark.parametrize("workload", ["retr_concurrent", "stor_concurrent"])
@pytest.mark.parametrize("passive", ["pasv", "epsv"])
def test_concurrent_transfers(target, workload, passive):
    p = small(passive=passive)
    r, cps, _ = run(workload, target, p)
    assert r.errors == {}, r.notes
    assert r.ops == 20 and r.bytes == 20 * p.file_size
    assert len(r.clients) == 20 and all(c.ok and c.bytes == p.file_size for c in r.clients)
    assert max(c.seconds for c in r.clients) <= r.elapsed_s + 1e-6
    assert cps == ["loaded", MEASURE_BEGIN, MEASURE_END]  # the sessions are up before the span
    # the fairness rows of a real phase: every figure, ordered, from the stored per-client list
    fair = {s.stat: s for s in phase_samples(r) if s.metric == "fairness"}
    assert len(fair["jain"].raw) == 20 and 1 / 20 <= fair["jain"].value <= 1
    assert fair["min_rate"].value <= fair["p50_rate"].value <= fair["p95_rate"].value <= fair["max_rate"].value
    assert 0 < fair["min_time"].value <= fair["p50_time"].value <= fair["p95_time"].value <= fair["max_time"].value
    assert fair["jain"].value == pytest.approx(1 / (1 + fair["cv"].value ** 2))


def test_stor_concurrent_caught_by_the_size_check_when_a_server_drops_uploads(tmp_path):
    """A pyftpdlib that deletes every third file it receives (after its 226): of 6
    concurrent STORs, 2 files are gone when the phase checks each with SIZE, so 2 are
    errors and only the 4 stored count (operations, bytes, per-client figures)."""
    from tests.support.pyftpd import start_pyftpd, stop

    proc, port = start_pyftpd(tmp_path, drop_third=True)
    try:
        p = small(clients=6)
        r, _, _ = run("stor_concurrent", Target("127.0.0.1", port, USER, PASSWORD, root=tmp_path), p)
    finally:
        stop(proc)
    assert r.errors == {"reply_5xx": 2}, (r.errors, r.notes)  # SIZE: 550 ... is not retrievable
    assert r.ops == 4 and r.bytes == 4 * p.file_size
    assert sorted(c.ok for c in r.clients) == [False, False, True, True, True, True]
    assert sum(c.bytes for c in r.clients) == r.bytes


def test_stor_concurrent_same_file(target, ftp_home):
    p = small(same_file=True, clients=10)
    r, _, _ = run("stor_concurrent", target, p)
    assert r.errors == {}, r.notes
    assert r.ops == 10 and "STOR: all clients write one file" in r.notes
    assert not list(ftp_home.glob("xferlab-stor-*"))  # uploaded files deleted in teardown


def test_quit(target):
    r, cps, _ = run("quit", target, small())
    assert r.errors == {} and r.ops == 20 and len(r.latencies_ms) == 20
    assert cps == ["loaded", MEASURE_BEGIN, MEASURE_END] and r.elapsed_s > 0


def test_catalogue_covered():
    from runner.load.ftp import workloads as runmod
    assert set(runmod._IMPLS) == {n for n, w in WORKLOADS.items() if w.protocol == "ftp"}


def test_phase_timeout_silent_server():
    """A server that accepts but never replies: every session is a timeout error, and the
    phase ends at phase_timeout, not op_timeout."""
    async def go():
        async with FakeFTP(greeting=None) as srv:
            t = Target("127.0.0.1", srv.port, "u", "p")
            t0 = time.perf_counter()
            r = await run_workload("login", t, small(clients=5, op_timeout=30, phase_timeout=0.5))
            return r, time.perf_counter() - t0
    r, wall = asyncio.run(go())
    assert r.errors == {"timeout": 5} and r.ops == 0
    assert wall < 3
    assert any("phase timeout" in n for n in r.notes)


@pytest.mark.parametrize("workload", ["retr", "stor_concurrent", "quit"])
def test_phase_timeout_other_workloads(workload):
    async def go():
        async with FakeFTP(greeting=None) as srv:
            t = Target("127.0.0.1", srv.port, "u", "p")
            t0 = time.perf_counter()
            r = await run_workload(workload, t, small(clients=3, op_timeout=30, phase_timeout=0.4))
            return r, time.perf_counter() - t0
    r, wall = asyncio.run(go())
    assert r.errors.get("timeout", 0) >= 1 and r.ops == 0
    assert wall < 3


def test_op_timeout_counts_each_session():
    async def go():
        async with FakeFTP(greeting=None) as srv:
            t = Target("127.0.0.1", srv.port, "u", "p")
            return await run_workload("login", t, small(clients=4, op_timeout=0.3, connect_timeout=0.3,
                                                        phase_timeout=10))
    r = asyncio.run(go())
    assert r.errors == {"timeout": 4}
    assert any("greeting: no reply within 0.3 s" in n for n in r.notes), r.notes


def test_slow_greeting_is_a_figure_and_late_sessions_are_counted():
    """A greeting held back past op_timeout (as the kernel does when a burst of connects
    overflowed the accept queue and the handshake is retransmitted) is waited for up to
    connect_timeout: the phase gets a figure, and the late sessions are counted."""
    async def go():
        async with FakeFTP(greeting_delays=(3.4, 3.4, 0.0)) as srv:
            t = Target("127.0.0.1", srv.port, "u", "p")
            return await run_workload("login", t, small(clients=5, op_timeout=0.5, connect_timeout=20,
                                                        phase_timeout=30))
    r = asyncio.run(go())
    assert r.errors == {} and r.ops == 5, (r.errors, r.notes)
    assert 3.4 <= r.elapsed_s < 10, r.elapsed_s          # the time until every session finished
    assert (r.greeted_sessions, r.late_sessions) == (5, 2)
    assert any(n.startswith("late sessions: 2 of 5 waited > 3 s") for n in r.notes), r.notes
    rows = {(x.metric, x.stat): x for x in phase_samples(r)}
    assert rows[("late_sessions", "value")].value == 2
    assert rows[("late_sessions", "value")].raw == {"greeted": 5, "threshold_s": 3.0}
    assert "2 of 5 sessions waited > 3 s" in headline(r)


def test_short_transfer_in_workload(tmp_path):
    async def go():
        async with FakeFTP(file_size=4 * MIB, retr_send=MIB) as srv:
            t = Target("127.0.0.1", srv.port, "u", "p", root=tmp_path)
            return await run_workload("retr", t, small(transfer_size=4 * MIB))
    r = asyncio.run(go())
    assert r.errors == {"short_transfer": 1} and r.bytes == 0 and r.ops == 0
    assert r.throughput_mib_s == 0


def test_refused_raises_load_error(free_port):
    t = Target("127.0.0.1", free_port, USER, PASSWORD)
    for workload in ("retr", "login"):
        with pytest.raises(LoadError) as e:
            run_workload_sync(workload, t, small(clients=3))
        assert f"127.0.0.1:{free_port}" in str(e.value) and "refused" in str(e.value)


def test_bad_password_raises_load_error(pyftpd):
    host, port, _ = pyftpd
    with pytest.raises(LoadError) as e:
        run_workload_sync("login", Target(host, port, USER, "wrong"), small(clients=2))
    assert "530" in str(e.value)


def test_unknown_workload(target):
    with pytest.raises(ValueError):
        run_workload_sync("mkd", target, small())


def _has_ipv6_loopback() -> bool:
    import socket
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@lacks_if(not _has_ipv6_loopback(), "an IPv6 loopback (::1)")
def test_epsv_over_ipv6(tmp_path):
    """EPSV (RFC 2428) is what works over IPv6: RETR and STOR against pyftpdlib on ::1."""
    from tests.support.pyftpd import start_pyftpd, stop
    proc, port = start_pyftpd(tmp_path, host="::1")
    try:
        t = Target("::1", port, USER, PASSWORD, root=tmp_path)
        for w in ("retr", "stor_concurrent"):
            r = run_workload_sync(w, t, small(passive="epsv", clients=5, duration=0.05))
            assert r.errors == {} and r.ops >= 1, r.notes
    finally:
        stop(proc)


def test_seed_scale_300_sessions(target):
    """The seed's N=300: 300 concurrent logins and 300 concurrent RETR, no errors."""
    r = run_workload_sync("login", target, small(clients=300))
    assert r.errors == {} and r.ops == 300, r.notes
    r = run_workload_sync("retr_concurrent", target, small(clients=300, file_size=64 * KIB))
    assert r.errors == {} and r.ops == 300 and r.bytes == 300 * 64 * KIB, r.notes
    assert len(r.clients) == 300


def test_no_garbage_collection_inside_a_phase(target):
    """The client's cyclic GC is paused for the phase (a gen-2 pause of a long
    campaign's heap would be timed as server latency), and restored afterwards."""
    import gc

    stamps: list[tuple[float, int]] = []

    def cb(phase, info):
        if phase == "start":
            stamps.append((time.time(), info["generation"]))

    junk = [[i] for i in range(200_000)]  # a heap worth collecting, cycles created below
    gc.collect()  # the junk is old now: the interpreter schedules no full collection soon
    gc.callbacks.append(cb)
    try:
        assert gc.isenabled()
        called = time.time()
        r = run_workload_sync("login", target, small(clients=50))
        for _ in range(20_000):  # cyclic garbage: collections must run again after the phase
            a: list = []
            a.append(a)
    finally:
        gc.callbacks.remove(cb)
    assert r.error_count == 0 and r.started_at is not None
    inside = [g for t, g in stamps if r.started_at <= t <= r.ended_at]
    assert inside == [], f"collections during the measured phase: {inside}"
    # before the phase only the young generations are collected: no scan of the whole heap
    before = [g for t, g in stamps if called <= t < r.started_at]
    assert 1 in before and 2 not in before, f"collections before the phase: {before}"
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert any(t > r.ended_at for t, _ in stamps), "the collector did not run again after the phase"
    del junk


def test_catalogue_facts_used_across_hosts():
    """The facts runner.multihost reads from the catalogue (were hard-coded there)."""
    p = WorkloadParams(transfer_size=4096, file_size=8192)
    assert {n for n, w in WORKLOADS.items() if w.single_stream} == {"stor", "retr", "stor_idle", "retr_idle"}
    assert {n: w.fixture_size(p) for n, w in WORKLOADS.items() if w.fixture_param} == {
        "retr": 4096, "retr_idle": 4096, "retr_concurrent": 8192, "http_download": 8192, "retr_sustained": 8192}
    assert {n for n, w in WORKLOADS.items() if w.client_split == "per_host"} == {"stor", "retr"}
    assert {n for n, w in WORKLOADS.items() if w.protocol == "http"} == {"http_upload", "http_download"}
    assert {w.protocol for w in WORKLOADS.values()} == {"ftp", "http"}


def test_stor_concurrent_teardown_deletes_over_every_session(target, ftp_home, monkeypatch):
    """The untimed teardown of a concurrent STOR deletes the uploaded files over all the
    phase's sessions at once, each its own file, and every file is gone afterwards."""
    from runner.load.ftp.session import FTPSession

    deleted: list[tuple[int, str]] = []
    real_dele = FTPSession.dele

    async def recording_dele(self, name):
        deleted.append((id(self), name))
        return await real_dele(self, name)

    monkeypatch.setattr(FTPSession, "dele", recording_dele)
    r, _, _ = run("stor_concurrent", target, small(clients=12))
    assert r.errors == {} and r.ops == 12, r.notes
    names = [n for _, n in deleted]
    assert sorted(names) == sorted(set(names)) and len(names) == 12   # each file once
    assert len({s for s, _ in deleted}) == 12                         # over 12 sessions, not one
    assert not list(ftp_home.glob("xferlab-stor-*"))                  # and the server holds none
