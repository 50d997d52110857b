"""runner.multihost's pure parts: splitting clients over hosts, combining per-host results,
the loadgen JSON round trip, the spec's hosts block. The real thing across hosts is in
tests/integration/test_multihost.py."""
from __future__ import annotations

import pytest

from runner.load.result import ClientFigures, PhaseResult
from runner.multihost.combine import combine, split_clients
from runner.multihost.loadgen import result_from_json, result_to_json


def _r(workload: str, elapsed: float, nbytes: int, lat: list[float], clients: list[ClientFigures],
       start: float, end: float, errors: dict | None = None) -> PhaseResult:
    return PhaseResult(workload, elapsed, nbytes, len(lat), lat, errors or {}, clients, 0.5, 0.25, ["n"],
                       start, end)


def test_split_clients() -> None:
    assert split_clients(300, 2) == [150, 150]
    assert split_clients(5, 2) == [3, 2]
    assert split_clients(1, 3) == [1, 0, 0]
    with pytest.raises(ValueError):
        split_clients(3, 0)


def test_combine_concurrent_uses_union_window_and_merges() -> None:
    a = _r("retr_concurrent", 1.0, 10 << 20, [900.0, 1000.0], [ClientFigures(5 << 20, 0.9),
                                                              ClientFigures(5 << 20, 1.0)], 100.0, 101.0)
    b = _r("retr_concurrent", 1.5, 10 << 20, [1400.0, 1500.0], [ClientFigures(5 << 20, 1.4),
                                                               ClientFigures(5 << 20, 1.5, True)], 100.2, 101.7,
           {"timeout": 1})
    c = combine([("cli1", a), ("cli2", b)])
    assert c.bytes == 20 << 20 and c.ops == 4
    assert c.elapsed_s == pytest.approx(1.7)
    assert c.throughput_mib_s == pytest.approx(20 / 1.7)
    assert sorted(c.latencies_ms) == [900.0, 1000.0, 1400.0, 1500.0]
    assert len(c.clients) == 4 and c.errors == {"timeout": 1}
    assert c.client_cpu_user_s == 1.0 and c.client_cpu_system_s == 0.5
    assert (c.started_at, c.ended_at) == (100.0, 101.7)
    assert any(n.startswith("cli2: ") for n in c.notes)


def test_combine_single_stream_sums_throughputs() -> None:
    a = _r("retr", 2.0, 200 << 20, [10.0], [], 0.0, 2.0)  # 100 MiB/s
    b = _r("retr", 1.0, 300 << 20, [10.0], [], 0.0, 1.0)  # 300 MiB/s
    c = combine([("a", a), ("b", b)])
    assert c.throughput_mib_s == pytest.approx(400.0)


def test_combine_rejects_mixed_or_empty() -> None:
    with pytest.raises(ValueError):
        combine([])
    with pytest.raises(ValueError):
        combine([("a", _r("login", 1, 0, [], [], 0, 1)), ("b", _r("quit", 1, 0, [], [], 0, 1))])


def test_loadgen_json_round_trip() -> None:
    r = _r("retr_concurrent", 1.0, 3, [1.5], [ClientFigures(3, 1.0, False)], 5.0, 6.0)
    assert result_from_json(result_to_json(r)) == r


def test_spec_hosts_block(tmp_path, monkeypatch) -> None:
    from runner.spec.model import SpecError, parse_spec

    monkeypatch.setenv("XFERLAB_INVENTORY_DIRS", str(tmp_path))  # inventories must be under it
    (tmp_path / "inv.ini").write_text("[servers]\nsrv1\n[clients]\ncli1\n")
    monkeypatch.chdir(tmp_path)
    base = {"servers": [{"name": "pyftpdlib"}], "workloads": [{"name": "login"}]}
    spec = parse_spec({**base, "hosts": {"inventory": "inv.ini", "clients": ["cli1"]}})
    assert spec.hosts.inventory == "inv.ini" and spec.hosts.start_delay == 3.0
    assert parse_spec(base).hosts is None
    with pytest.raises(SpecError, match="hosts.bogus"):
        parse_spec({**base, "hosts": {"inventory": "x", "bogus": 1}})


def test_client_bound_is_judged_per_host() -> None:
    from runner.cell.samples import headline
    from runner.load.result import client_utilization

    # two hosts, each 0.5 s of CPU over a 1 s phase: 50% each, not client-bound
    half = [_r("login", 1.0, 0, [1.0] * 10, [], 100.0, 101.0) for _ in range(2)]
    for r in half:
        r.client_cpu_user_s, r.client_cpu_system_s = 0.4, 0.1
    c = combine([("a", half[0]), ("b", half[1])])
    assert c.client_cpu_user_s + c.client_cpu_system_s == 1.0        # the total is still the sum
    assert client_utilization(c) == 0.5 and "[client-bound]" not in headline(c)
    # one host busy: the combined result is client-bound
    half[1].client_cpu_user_s = 0.9
    c = combine([("a", half[0]), ("b", half[1])])
    assert client_utilization(c) == 1.0 and "[client-bound]" in headline(c)
    assert result_from_json(result_to_json(c)).busiest_client_utilization == 1.0
    assert combine([("a", half[0])]).busiest_client_utilization is None


def test_steal_is_judged_per_host_and_the_highest_kept() -> None:
    """Host a: 0.45 on the CPU, 0.42 waiting, 10% of its CPU stolen: 0.45 / 0.9 + 0.42 = 0.92,
    client-bound; host b: the same CPU and wait with no steal (0.87) is not. The combined
    result is flagged by a, keeps the highest steal share, and round-trips through JSON."""
    from runner.load.result import client_bound, client_saturation

    a, b = (_r("login", 1.0, 0, [1.0] * 10, [], 100.0, 101.0) for _ in range(2))
    for r, share in ((a, 0.10), (b, 0.0)):
        r.client_cpu_user_s, r.client_cpu_system_s = 0.45, 0.0
        r.client_runqueue_wait_s, r.client_steal_share = 0.42, share
    assert client_bound(a) and not client_bound(b)
    c = combine([("a", a), ("b", b)])
    assert c.client_steal_share == 0.10 and client_saturation(c) == pytest.approx(0.92) and client_bound(c)
    assert result_from_json(result_to_json(c)).client_steal_share == 0.10
    b.client_steal_share = None  # not measured on one host: not known for the whole
    assert combine([("a", a), ("b", b)]).client_steal_share is None



def test_http_results_combine_and_round_trip() -> None:
    a = PhaseResult("http_upload", 1.0, 800, 100, [1.0], {"reset": 2}, [ClientFigures(800, 1.0, False, 100)],
                    0.5, 0.1, [], 10.0, 11.0, requests=105, successful=100, network_failed=2, non_2xx={"413": 3},
                    bytes_read=1000, bytes_written=9000, reconnects=2, latency_percentiles_ms={"p50": 1.0},
                    driver_max_rss=5)
    b = PhaseResult("http_upload", 1.0, 400, 50, [2.0], {}, [ClientFigures(400, 1.0, True, 50)], 0.5, 0.1, [],
                    10.0, 11.0, requests=51, successful=50, non_2xx={"413": 1}, bytes_read=500, bytes_written=4500,
                    driver_max_rss=7)
    c = combine([("p1", a), ("p2", b)], kind="process")
    assert (c.requests, c.successful, c.network_failed, c.non_2xx) == (156, 150, 2, {"413": 4})
    assert (c.bytes_read, c.bytes_written, c.reconnects, c.driver_max_rss) == (1500, 13500, 2, 7)
    assert c.latency_percentiles_ms == {} and any("cannot be merged" in n for n in c.notes)
    assert [x.requests for x in c.clients] == [100, 50]
    assert result_from_json(result_to_json(a)) == a


def _hist(values_s: list[float]) -> str:
    from runner.load import hdr

    h = hdr.new_histogram()
    for v in values_s:
        hdr.record_s(h, v)
    return hdr.encode(h)


def test_combine_adds_hdr_histograms_and_round_trips() -> None:
    """Sustained workloads: the hosts' HDR histograms add, so the combined p99 is the p99
    of all operations (here host b's slow tail: 2 of 100 operations at 1 s, p99 = 1000 ms,
    which neither an average of the hosts' p99 (505 ms) nor host a's (10 ms) gives)."""
    from runner.load import hdr

    a = _r("retr_sustained", 1.0, 1 << 20, [], [ClientFigures(1 << 20, 1.0)], 100.0, 101.0)
    b = _r("retr_sustained", 1.0, 1 << 20, [], [ClientFigures(1 << 20, 1.0)], 100.0, 101.0)
    a.histograms = {"latency": _hist([0.010] * 50), "service": _hist([0.005] * 50)}
    b.histograms = {"latency": _hist([0.010] * 48 + [1.0, 1.0]), "service": _hist([0.005] * 50)}
    a.user_rate = b.user_rate = 4096
    c = combine([("a", a), ("b", b)])
    assert hdr.count(c.histograms["latency"]) == 100 and hdr.count(c.histograms["service"]) == 100
    pct = hdr.percentiles_ms(c.histograms["latency"])
    assert pct["p50"] == pytest.approx(10.0, rel=1e-3)
    assert pct["p99"] == pytest.approx(1000.0, rel=1e-3)
    assert c.user_rate == 4096
    assert result_from_json(result_to_json(c)).histograms == c.histograms
    b.histograms = {"latency": b.histograms["latency"]}
    with pytest.raises(ValueError, match="service"):
        combine([("a", a), ("b", b)])
    b.histograms = {"latency": "garbage", "service": a.histograms["service"]}
    with pytest.raises(ValueError, match="HDR"):
        combine([("a", a), ("b", b)])


def test_host_params_split_an_open_loop_rate() -> None:
    """Across client processes or hosts the sustained workloads' open-loop rate is split in
    proportion to each one's clients, so together they keep the spec's rate."""
    from runner.catalogue.workloads import WorkloadParams
    from runner.multihost.combine import client_shares, host_params

    p = WorkloadParams(clients=5, rate=100.0)
    shares = client_shares("retr_sustained", 5, 2)
    assert shares == [3, 2]
    parts = [host_params("retr_sustained", p, s) for s in shares]
    assert [(q.clients, q.rate) for q in parts] == [(3, 60.0), (2, 40.0)]
    assert host_params("retr_sustained", WorkloadParams(clients=4), 2).rate is None  # closed loop
    assert host_params("login", p, 3).rate == 100.0  # a parameter the workload does not use is left alone
