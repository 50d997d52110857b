"""The sustained-load workloads (runner.load.ftp.sustained) against real servers on loopback:
pyftpdlib (the session fixture of conftest.py) and tpd (built with make, plain binary),
closed and open loop, per-operation and reused sessions, RETR and STOR; and the proof of
the coordinated-omission correction: an open loop against a tpd stopped with SIGSTOP for
0.5 s inside the phase shows the stall in its corrected p99, not in its service time."""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.cell.samples import phase_samples
from runner.load import hdr
from runner.load.ftp.workloads import run_workload_sync
from runner.load.target import Target
from tests.tpd.conftest import TpdServer

KIB = 1 << 10


def _params(**kw) -> WorkloadParams:
    base = dict(clients=4, file_size=64 * KIB, duration=1.0, op_timeout=10, connect_timeout=10, phase_timeout=30)
    base.update(kw)
    return WorkloadParams(**base)


def _check_figures(r, clients: int, size: int) -> None:
    assert r.ops > 0 and not r.errors, (r.errors, r.notes)
    assert r.bytes == r.ops * size
    assert r.latencies_ms == []
    assert hdr.count(r.histograms["latency"]) == r.ops == hdr.count(r.histograms["service"])
    assert len(r.clients) == clients
    assert sum(c.bytes for c in r.clients) == r.bytes
    assert all(c.ok and c.bytes > 0 and c.seconds > 0 for c in r.clients)


def _retr_with_a_stall(server: TpdServer, target: Target, p: WorkloadParams, *, after_s: float, for_s: float):
    """``retr_sustained`` with ``p`` against ``server``, stopped with SIGSTOP ``after_s``
    seconds after the phase began (the checkpoint "loaded": sessions logged in) for
    ``for_s`` seconds. Returns (the PhaseResult, the stall's measured length in s: from the
    return of the SIGSTOP kill to that of the SIGCONT one); the server is always continued."""
    pid = server.proc.pid
    stalled: list[float] = []

    def stall() -> None:
        time.sleep(after_s)
        os.kill(pid, signal.SIGSTOP)
        t0 = time.perf_counter()
        time.sleep(for_s)
        os.kill(pid, signal.SIGCONT)
        stalled.append(time.perf_counter() - t0)

    t = threading.Thread(target=stall)
    try:
        r = run_workload_sync("retr_sustained", target, p, checkpoint=lambda name: name == "loaded" and t.start())
    finally:
        if t.ident is not None:
            t.join()
        os.kill(pid, signal.SIGCONT)
    assert len(stalled) == 1, "the stall did not run inside the phase"
    return r, stalled[0]


@pytest.mark.parametrize("workload", ["retr_sustained", "stor_sustained"])
@pytest.mark.parametrize("session", ["per_op", "reuse"])
def test_closed_loop_pyftpdlib(target, workload, session):
    p = _params(session=session)
    r = run_workload_sync(workload, target, p)
    _check_figures(r, 4, p.file_size)
    # starts stop at duration; the last ones end after it, by at most the longest operation
    # (HDR keeps 3 significant digits: 10 ms of slack), itself well under 0.5 s on loopback
    longest_s = hdr.percentiles_ms(r.histograms["latency"])["max"] / 1000.0
    assert longest_s < 0.5, longest_s
    assert 1.0 <= r.elapsed_s <= 1.0 + longest_s + 0.01, (r.elapsed_s, longest_s)
    # closed loop: the intended start is the actual start, so both histograms agree
    assert r.histograms["latency"] == r.histograms["service"]
    assert r.user_rate == p.user_rate
    rows = {(s.metric, s.stat): s for s in phase_samples(r)}
    assert rows[("latency", "p99")].value >= rows[("latency", "p50")].value > 0
    assert rows[("latency", "p50")].raw["unit"] == "us"
    assert ("service_time", "p99") in rows and ("fairness", "jain") in rows
    assert rows[("users_at_rate", "value")].raw == {"rate": p.user_rate, "clients": 4}


def test_stor_sustained_leaves_no_file(target):
    run_workload_sync("stor_sustained", target, _params(session="reuse", clients=3))
    assert not [f for f in os.listdir(target.root) if f.startswith("xferlab-sust-")]


def test_open_loop_keeps_its_rate(target):
    """40 operations/s for 1 s: 40 operations due, all run (the server is far faster)."""
    r = run_workload_sync("retr_sustained", target, _params(rate=40.0, session="reuse"))
    _check_figures(r, 4, 64 * KIB)
    assert r.ops == 40
    assert any("open loop" in n for n in r.notes)


@pytest.fixture
def tpd_target(tpd_server) -> Target:
    return Target(host="127.0.0.1", port=tpd_server.ftp_port, user="alice", password="secret",
                  root=tpd_server.home)


@pytest.mark.parametrize("session", ["per_op", "reuse"])
def test_closed_loop_tpd(tpd_target, session):
    p = _params(session=session, clients=8)
    r = run_workload_sync("retr_sustained", tpd_target, p)
    _check_figures(r, 8, p.file_size)


def test_stor_sustained_tpd(tpd_target):
    p = _params(session="per_op", clients=4)
    r = run_workload_sync("stor_sustained", tpd_target, p)
    _check_figures(r, 4, p.file_size)


def test_open_loop_shows_a_stall_the_service_time_hides(tpd_server, tpd_target):
    """SIGSTOP tpd for S = 0.5 s (measured: the stall's real length) in the middle of a 2 s
    open loop of R = 200 RETR/s over 2 reused sessions (400 operations due, one every 5 ms).
    The 2 operations in flight at the stop take the stall as service time; the R x S = 100
    due during it cannot start (both clients are stuck), so they start when tpd continues,
    and their latency from the intended start holds the wait: the operation due x s into
    the stall waits at least S - x (more by the catch-up of the ones due before it). So:

    * the k-th largest corrected latency is at least S - (k - 1) / R (10 ms of timer and
      HDR slack): max (k = 1) S, p99 (k = 4 of 400) S - 15 ms, p90 (k = 40) S - 195 ms;
    * none exceeds S plus one service time (the first operation due in the stall starts
      first when tpd continues; service p99 is under 100 ms): max <= S + 100 ms;
    * p50: 300 of the 400 started on time, so the median is a plain service time: at most
      20 ms, and never below the service time's median (each operation's corrected
      latency is at least its service time). A correction counted from the phase's start
      would put the median near 1 s and the max near 2 s.

    Service time: 2 of 400 (0.5%) slow, so its p99 stays low: the stall is hidden there,
    the coordinated omission the correction undoes."""
    rate = 200.0
    p = _params(session="reuse", clients=2, duration=2.0, rate=rate, file_size=16 * KIB)
    r, stall_s = _retr_with_a_stall(tpd_server, tpd_target, p, after_s=0.8, for_s=0.5)
    assert not r.errors, (r.errors, r.notes)
    assert r.ops == 400
    corrected = hdr.percentiles_ms(r.histograms["latency"])
    service = hdr.percentiles_ms(r.histograms["service"])
    stall_ms = stall_s * 1000.0

    for name, k in (("max", 1), ("p99", 4), ("p90", 40)):
        least = stall_ms - (k - 1) / rate * 1000.0 - 10.0
        assert corrected[name] >= least, (name, corrected, f"stall {stall_ms:.1f} ms")
    assert corrected["max"] <= stall_ms + 100.0, (corrected, f"stall {stall_ms:.1f} ms")
    assert service["p50"] <= corrected["p50"] <= 20.0, (corrected, service)
    assert service["max"] >= stall_ms - 10.0, service  # the operations caught in flight
    assert service["p99"] < 100, service


def test_phase_timeout_counts_the_operations_in_flight(target):
    """A phase cut by ``phase_timeout`` (1 s of a 5 s closed loop) returns what it measured;
    each client was inside an operation when it was cut, so each counts one ``timeout``."""
    r = run_workload_sync("retr_sustained", target, _params(duration=5.0, phase_timeout=1.0, clients=3))
    assert r.ops > 0 and r.errors == {"timeout": 3}, (r.errors, r.notes)
    assert r.elapsed_s == pytest.approx(1.0, abs=0.3)
    assert hdr.count(r.histograms["latency"]) == r.ops


def test_per_op_sessions_are_counted(target):
    """Each per-operation session is a greeted session (the late-session figure covers them)."""
    r = run_workload_sync("retr_sustained", target, _params(clients=2, duration=0.5))
    assert r.greeted_sessions >= r.ops + 1  # + the untimed setup session
    from runner.cell.samples import headline

    assert "/s, p99 " in headline(r)


def test_no_server_is_a_load_error():
    from runner.load.base import LoadError
    from tests.support.ports import free_port

    t = Target(host="127.0.0.1", port=free_port(), user="u", password="p", root=None)
    with pytest.raises(LoadError, match="cannot log in.*refused"):
        run_workload_sync("stor_sustained", t, _params())


def test_open_loop_backlog_past_the_drain_bound(tpd_server, tpd_target):
    """tpd stopped from 0.1 s to 2.5 s of a 1 s open loop of 100 RETR/s on one session: the
    operation in flight waits out the stop; when it ends the drain bound (2 x duration) has
    passed, so the operations due but never started are counted as ``backlog`` errors, the
    completed ones keep their (huge) corrected latency."""
    p = _params(session="reuse", clients=1, duration=1.0, rate=100.0, file_size=16 * KIB)
    r, _ = _retr_with_a_stall(tpd_server, tpd_target, p, after_s=0.1, for_s=2.4)
    assert set(r.errors) == {"backlog"}, (r.errors, r.notes)
    assert r.ops + r.errors["backlog"] == 100
    assert 1 <= r.ops <= 20 and r.errors["backlog"] >= 80
    assert hdr.percentiles_ms(r.histograms["latency"])["max"] > 2000
    assert any("backlog" in n for n in r.notes)
