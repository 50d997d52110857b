"""The ``mixed`` workload (runner.load.ftp.mixed) against real servers on loopback: pyftpdlib
(the session fixture of tests/runner/conftest.py) and tpd (built with make): operation counts
against the weights (binomial bounds), DELE checked on the server's disk, per-bucket and
per-kind figures adding up to the totals, listings of 1,000 entries checked against the
directory, and the latency from the intended start against a known stall of the client's
event loop."""
from __future__ import annotations

import asyncio
import math
import os
import time
from pathlib import Path

import pytest

from runner.catalogue.mixed import TRANSFER_OPS
from runner.catalogue.workloads import WorkloadParams
from runner.cell.mixed_samples import mixed_samples
from runner.load import hdr
from runner.load.ftp.mixed import op_sequence
from runner.load.ftp.workloads import run_workload, run_workload_sync
from runner.load.target import Target

KIB = 1 << 10


def _params(**kw) -> WorkloadParams:
    base = dict(clients=3, duration=1.5, session_ops=15, op_timeout=10, connect_timeout=10, phase_timeout=60,
                sizes={"kind": "fixed", "size": "4KiB"}, dir_entries=10)
    base.update(kw)
    return WorkloadParams(**base)


@pytest.fixture(params=["pyftpdlib", "tpd"])
def server_target(request) -> Target:
    """A Target at pyftpdlib or tpd, both with their home as a local path."""
    if request.param == "pyftpdlib":
        return request.getfixturevalue("target")
    srv = request.getfixturevalue("tpd_server")
    return Target(host="127.0.0.1", port=srv.ftp_port, user="alice", password="secret", root=srv.home)


def _check_totals(r) -> None:
    """Per-kind and per-bucket figures add up to the totals exactly."""
    assert sum(f.ops for f in r.op_figures.values()) == r.ops
    assert sum(f.bytes for f in r.op_figures.values()) == r.bytes
    assert sum(sum(f.errors.values()) for f in r.op_figures.values()) == sum(r.errors.values())
    moved = [r.op_figures[k] for k in TRANSFER_OPS if k in r.op_figures]
    assert sum(b.ops for b in r.buckets.values()) == sum(f.ops for f in moved)
    assert sum(b.bytes for b in r.buckets.values()) == sum(f.bytes for f in moved)
    assert hdr.count(r.histograms["latency"]) == r.ops
    assert sum(hdr.count(f.latency) for f in r.op_figures.values() if f.latency) == r.ops
    assert sum(s.ops for s in r.sessions) == r.ops
    assert sum(s.bytes for s in r.sessions) == r.bytes == sum(c.bytes for c in r.clients)


def test_counts_match_the_weights(server_target):
    mix = {"retr": 50, "size": 30, "noop": 20}
    p = _params(mix=mix, seed=7)
    r = run_workload_sync("mixed", server_target, p)
    assert not r.errors, (r.errors, r.notes)
    _check_totals(r)
    drawn = {k: f.ops for k, f in r.op_figures.items() if k != "login"}
    n = sum(drawn.values())
    assert n > 300, n
    assert r.op_figures["login"].ops == len(r.sessions)
    for op, w in mix.items():  # binomial: within 4.5 standard deviations (a false alarm about 1 in 150,000)
        q = w / 100
        sd = math.sqrt(n * q * (1 - q))
        assert abs(drawn.get(op, 0) - n * q) <= 4.5 * sd, (op, drawn, n)
    assert set(drawn) == set(mix)
    # each client's kinds are the first draws of its own generator: the phase is reproducible
    per_client_first = op_sequence(p.mix, 7, 0, 5)
    assert per_client_first == op_sequence(p.mix, 7, 0, 5) != op_sequence(p.mix, 8, 0, 5)
    # every RETR moved the whole 4 KiB file
    assert r.op_figures["retr"].bytes == 4096 * r.op_figures["retr"].ops
    assert r.seed == 7


def test_dele_removes_the_file_on_the_servers_disk(server_target):
    p = _params(mix={"stor": 1, "dele": 1}, clients=2, duration=1.0)
    r = run_workload_sync("mixed", server_target, p)
    assert not r.errors, (r.errors, r.notes)
    _check_totals(r)
    home = Path(server_target.root)
    assert min(r.op_figures["dele"].ops, 1000) == len(r.deleted) > 10
    for name in r.deleted:
        assert not (home / name).exists(), name
    # STORed files were on disk before their DELE: the scratch directory is gone after the phase
    assert r.op_figures["stor"].bytes == 4096 * r.op_figures["stor"].ops
    assert not list(home.glob("xferlab-mix-*")), list(home.glob("xferlab-mix-*/*"))[:5]


def test_buckets_add_up_to_the_totals(server_target):
    p = _params(mix={"retr": 3, "stor": 1, "resume": 1, "list": 1},
                sizes={"kind": "buckets", "buckets": {"4KiB": 60, "64KiB": 30, "256KiB": 10}}, seed=3)
    r = run_workload_sync("mixed", server_target, p)
    assert not r.errors, (r.errors, r.notes)
    _check_totals(r)
    assert set(r.buckets) == {"4K", "64K", "256K"}
    sizes = {"4K": 4 * KIB, "64K": 64 * KIB, "256K": 256 * KIB}
    for label, b in r.buckets.items():
        # a RETR/STOR moves the whole file, a resume less than it (and at least one byte)
        assert b.ops <= b.bytes <= b.ops * sizes[label], (label, b)
    retr_stor = r.op_figures["retr"].bytes + r.op_figures["stor"].bytes
    assert retr_stor < sum(b.bytes for b in r.buckets.values())  # the resumes' bytes are in the buckets too
    # the stored rows add up as well
    rows = {(s.metric, s.stat): s.value for s in mixed_samples(r)}
    assert sum(v for (m, _), v in rows.items() if m == "bucket_ops") == sum(
        rows[("op_count", k)] for k in TRANSFER_OPS)
    assert sum(v for (m, _), v in rows.items() if m == "bucket_bytes") == sum(
        rows[("bytes", k)] for k in TRANSFER_OPS)
    assert sum(v for (m, _), v in rows.items() if m == "op_count") == r.ops


def test_list_of_1000_entries_returns_1000_names(server_target):
    p = _params(mix={"list": 1, "mlsd": 1, "cwd": 1}, dir_entries=1000, clients=2, duration=1.0)
    r = run_workload_sync("mixed", server_target, p)
    assert not r.errors, (r.errors, r.notes)
    _check_totals(r)
    d = Path(server_target.root) / "xferlab-dir-1000"
    assert len(os.listdir(d)) == 1000
    for op in ("list", "mlsd"):
        f = r.op_figures[op]
        assert f.ops > 0 and f.items == 1000 * f.ops
        assert f.bytes >= f.ops * 1000 * len("e0\r\n")  # at least every name and its line end
    rows = {(s.metric, s.stat): s.value for s in mixed_samples(r)}
    assert rows[("listing_names", "list")] == rows[("listing_names", "mlsd")] == 1000


def _stalled_run(target: Target, p: WorkloadParams, stall_s: float, after_s: float):
    """A mixed phase whose event loop is blocked for ``stall_s`` (time.sleep in a callback)
    ``after_s`` into the measured phase. Returns (the PhaseResult, [the stall's measured
    length, s], [when it was due], [when the loop ran a callback queued two iterations
    after it]; perf_counter seconds)."""
    stalled: list[float] = []
    due: list[float] = []
    resumed: list[float] = []

    async def main():
        loop = asyncio.get_running_loop()

        def block() -> None:
            t0 = time.perf_counter()
            time.sleep(stall_s)
            stalled.append(time.perf_counter() - t0)
            loop.call_soon(loop.call_soon, lambda: resumed.append(time.perf_counter()))

        def at_loaded(name: str) -> None:
            if name == "loaded":
                due.append(time.perf_counter() + after_s)
                loop.call_later(after_s, block)

        return await run_workload("mixed", target, p, checkpoint=at_loaded)

    return asyncio.run(main()), stalled, due, resumed


def test_latency_from_the_intended_start_shows_a_client_stall(target):
    """One client, NOOP every 50 ms (fixed think time), against pyftpdlib; the client's event
    loop is blocked for S = 0.4 s (time.sleep in a callback due 0.5 s into the phase, at
    ``due``). The operation due during the stall starts when the loop runs again, so its
    latency from the intended start is at least S - think - (one service time).

    Upper bound, from clocks read in the same run: that operation was due at or after
    ``due`` (one due earlier would have sent its NOOP before the stall, and its service
    time, not below 50 ms, would hold the stall), and it starts just after a marker the
    stall queues two loop iterations ahead (``resumed``: a ``call_soon`` from a
    ``call_soon``, which runs right before the task the expired sleep wakes). So its
    latency is at most ``resumed - due`` + the longest service time + HDR's 3-digit
    slack (0.1%) + 2 ms for the one callback in between. ``resumed - due`` holds the
    loop's lateness in running the stall and in coming back from it, which a slow
    virtual CPU stretches: in one CI run the NOOP's median service time was 3.2 ms and
    the stalled operation 10.9 ms past S + the longest service time. The stall can land
    while a NOOP awaits its reply (a chance of about one service time in 50 ms): that
    NOOP's service time then holds the stall, and the phase is run again (at most three).
    """
    stall_s, think_s = 0.4, 0.05
    p = _params(mix={"noop": 1}, clients=1, duration=1.5, session_ops=1000, think="fixed", think_ms=think_s * 1000)
    for _ in range(3):  # a stall that lands while a NOOP awaits its reply is in that NOOP's service time: again
        r, stalled, due, resumed = _stalled_run(target, p, stall_s, 0.5)
        assert len(stalled) == 1 and len(resumed) == 1 and not r.errors
        lat = hdr.percentiles_ms(r.op_figures["noop"].latency)
        svc = hdr.percentiles_ms(r.op_figures["noop"].service)
        if svc["max"] < stall_s * 1000:
            break
    assert svc["max"] < 50, svc
    s_ms = stalled[0] * 1000
    late_ms = (resumed[0] - due[0]) * 1000
    assert s_ms <= late_ms, (s_ms, late_ms)
    upper = 1.001 * (late_ms + svc["max"]) + 2
    assert s_ms - think_s * 1000 - svc["max"] <= lat["max"] <= upper, (lat, svc, s_ms, late_ms)
    # the schedule: one NOOP per think time plus its service, minus what the stall took
    n = r.op_figures["noop"].ops
    assert (1.5 - stalled[0]) / (think_s + svc["max"] / 1000) - 2 <= n <= 1.5 / think_s + 1, n


def test_fixtures_over_ftp_without_a_local_home(remote_target, pyftpd):
    """Without the home as a local path, the storm directory and the listing directory are
    made over FTP (NLST, then STOR of the missing names), checked on the server's disk, and
    reused by the next phase (nothing uploaded twice: the files keep their modification time)."""
    _, _, home = pyftpd
    p = _params(mix={"retr": 2, "list": 1, "size": 1}, clients=2, duration=0.8, dir_entries=37,
                sizes={"kind": "storm", "count": 50, "size": "4KiB"})
    r = run_workload_sync("mixed", remote_target, p)
    assert not r.errors, (r.errors, r.notes)
    _check_totals(r)
    storm = Path(home) / "xferlab-storm-50x4096"
    assert sorted(os.listdir(storm)) == sorted(f"f{i}.bin" for i in range(50))
    assert {(storm / n).stat().st_size for n in os.listdir(storm)} == {4096}
    listing = Path(home) / "xferlab-dir-37"
    assert sorted(os.listdir(listing)) == sorted(f"e{i}" for i in range(37))
    assert r.op_figures["list"].items == 37 * r.op_figures["list"].ops
    assert r.op_figures["retr"].bytes == 4096 * r.op_figures["retr"].ops
    before = {n: (storm / n).stat().st_mtime_ns for n in os.listdir(storm)}
    again = run_workload_sync("mixed", remote_target, p)
    assert not again.errors and {n: (storm / n).stat().st_mtime_ns for n in os.listdir(storm)} == before


def test_log2_range_buckets_are_octaves(target):
    """A log2 range of 1 KiB .. 256 KiB: each transfer's bytes lie in its bucket's octave
    [2^k, 2^(k+1)), so a bucket of n transfers holds between n x 2^k and n x 2^(k+1) bytes;
    the fixture set is the seeded draw of 16 sizes, every one of them on the server's disk."""
    from runner.catalogue.workloads import parse_size

    p = _params(mix={"retr": 1, "stor": 1}, sizes={"kind": "log2", "min": "1K", "max": "256K", "files": 16}, seed=21)
    r = run_workload_sync("mixed", target, p)
    assert not r.errors, (r.errors, r.notes)
    _check_totals(r)
    assert len(r.buckets) >= 4
    for label, b in r.buckets.items():
        lo, hi = (parse_size(x) for x in label.split("-"))
        assert hi == 2 * lo and b.ops * lo <= b.bytes < b.ops * hi, (label, b)
    for size, _ in p.sizes.fixture_set(21):
        assert (Path(target.root) / f"xferlab-{size}.bin").stat().st_size == size


def test_sessions_last_k_operations_or_t_seconds(target):
    """K: with ``session_ops`` 5 every session that the phase's end did not cut holds its
    login and 5 operations. T: with ``session_seconds`` 0.2 and a NOOP every 20 ms (fixed
    think time), every session but the last of each client lasts at least 0.2 s and at most
    0.2 s + one think time + the longest latency from the intended start (the last
    operation is due before 0.2 s + think and ends one latency after it is due: the
    latency holds the timer's lateness and the service time, both read in the same run;
    + HDR's 0.1% and 1 ms), and holds fewer than 0.2 / 0.02 + 2 operations."""
    k = run_workload_sync("mixed", target, _params(mix={"noop": 1, "size": 1}, clients=2, session_ops=5,
                                                    duration=1.0))
    assert not k.errors and len(k.sessions) > 10
    assert sum(s.ops == 6 for s in k.sessions) >= len(k.sessions) - 2  # at most one cut session per client
    assert all(s.ops <= 6 for s in k.sessions)
    p = _params(mix={"noop": 1}, clients=2, session_ops=1000, session_seconds=0.2, think="fixed", think_ms=20,
                duration=1.5)
    t = run_workload_sync("mixed", target, p)
    assert not t.errors and len(t.sessions) >= 6
    lat_max_s = max(hdr.percentiles_ms(t.op_figures[k].latency)["max"] for k in ("noop", "login")) / 1000
    whole = sorted(t.sessions, key=lambda s: s.seconds)[2:]  # the two cut by the phase's end are the shortest
    for s in whole:
        assert 0.2 <= s.seconds <= 0.2 + 0.02 + 1.001 * lat_max_s + 0.001, (s, lat_max_s)
        assert s.ops < 0.2 / 0.02 + 2


def test_a_stor_the_server_did_not_keep_is_a_stor_error(tmp_path):
    """pyftpdlib told to delete every third file it receives (after its 226): the untimed SIZE
    check after the phase finds the loss and counts it as an error of ``stor``; per-kind
    errors still add up to the phase's errors, and the scratch directory is emptied."""
    from tests.support.pyftpd import PASSWORD, USER, start_pyftpd, stop

    proc, port = start_pyftpd(tmp_path, drop_third=True)
    try:
        t = Target(host="127.0.0.1", port=port, user=USER, password=PASSWORD, root=tmp_path)
        r = run_workload_sync("mixed", t, _params(mix={"stor": 1}, clients=1, duration=0.5))
    finally:
        stop(proc)
    assert r.op_figures["stor"].ops >= 3
    assert sum(r.errors.values()) == 1 and sum(r.op_figures["stor"].errors.values()) == 1, (r.errors, r.notes)
    assert any(n.startswith("after the phase:") for n in r.notes)
    _check_totals(r)
    assert not list(tmp_path.glob("xferlab-mix-*"))
