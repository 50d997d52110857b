"""wrk and h2load output parsers, on output captured from real runs on this kind of machine
(tests/runner/load/tools/data/: wrk 4.1.0 and h2load 1.52.0 against tpd's HTTP listener and the
tests' own upload server, with the Lua script runner.load.tools.wrk writes)."""
from __future__ import annotations

from pathlib import Path

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.load.base import LoadError
from runner.load.tools.child import ChildRun
from runner.load.tools.h2load import h2load_result, parse_h2load
from runner.load.tools.wrk import parse_wrk, wrk_result

DATA = Path(__file__).parent / "data"


def _run(name: str) -> ChildRun:
    return ChildRun(0, (DATA / name).read_text(), "", 0.25, 0.5, 6 << 20, 1.0)


def _identity(r) -> None:
    assert r.requests == r.successful + sum(r.non_2xx.values()) + r.network_failed
    assert r.ops == r.successful


def test_wrk_put_ok():
    d = parse_wrk((DATA / "wrk_put_tpd.txt").read_text())
    assert d["requests"] == 1483 and d["written"] == 12500235 and d["bytes_read"] == 225202
    assert d["p95"] == pytest.approx(25.796) and d["max"] == pytest.approx(52.938)
    assert d["elapsed_s"] == pytest.approx(1.016147)
    r = wrk_result("http_upload", WorkloadParams(body_size=8192), _run("wrk_put_tpd.txt"), [])
    _identity(r)
    assert r.successful == 1483 and r.bytes == 1483 * 8192 and r.network_failed == 0 and not r.non_2xx
    assert r.client_cpu_user_s == 0.25 and r.driver_max_rss == 6 << 20
    assert set(r.latency_percentiles_ms) == {"p50", "p75", "p90", "p95", "p99", "max"}


def test_wrk_human_lines_without_xferlab_line():
    text = "\n".join(ln for ln in (DATA / "wrk_non2xx_tpd.txt").read_text().splitlines()
                     if not ln.startswith("xferlab-wrk:"))
    d = parse_wrk(text)
    assert d["requests"] == 11730 and d["non_2xx"] == 11730
    assert d["bytes_read"] == pytest.approx(1.96 * (1 << 20), rel=0.01)
    assert d["p50"] == pytest.approx(0.86) and d["p99"] == pytest.approx(38.57, rel=1e-3)
    assert "written" not in d and "p95" not in d


def test_wrk_non2xx_and_get():
    r = wrk_result("http_upload", WorkloadParams(), _run("wrk_non2xx_tpd.txt"), [])
    _identity(r)
    assert r.successful == 0 and r.non_2xx == {"4xx-5xx": 11730}
    g = wrk_result("http_download", WorkloadParams(file_size=100000), _run("wrk_get_tpd.txt"), [])
    _identity(g)
    assert g.successful == 8718 and g.bytes == 8718 * 100000 and g.bytes_read == 873958833
    p = wrk_result("http_upload", WorkloadParams(method="post"), _run("wrk_post_pyserver.txt"), [])
    assert p.successful == 2673 and p.bytes_written == 22135113


def test_wrk_socket_errors_and_refused():
    r = wrk_result("http_upload", WorkloadParams(), _run("wrk_socket_errors.txt"), [])
    _identity(r)
    assert r.successful == 0 and r.network_failed == 5364 and r.errors == {"read": 5364}
    x = wrk_result("http_upload", WorkloadParams(), ChildRun(1, (DATA / "wrk_refused.txt").read_text(), "",
                                                            0, 0, 0, 0.01), [])
    _identity(x)
    assert x.network_failed == 1 and x.errors == {"refused": 1}
    with pytest.raises(LoadError, match="wrk"):
        wrk_result("http_upload", WorkloadParams(), ChildRun(1, "", "bad option", 0, 0, 0, 0.01), [])


def test_h2load_get_and_post():
    d = parse_h2load((DATA / "h2load_get_tpd.txt").read_text())
    assert d["total"] == 2934 and d["started"] == 2954 and d["2xx"] == 2954 and d["elapsed_s"] == pytest.approx(1.0)
    r = h2load_result("http_download", WorkloadParams(clients=20, file_size=100000), _run("h2load_get_tpd.txt"), [])
    _identity(r)
    assert r.successful == 2934 and r.bytes == 2934 * 100000 and r.bytes_read > r.bytes and r.unfinished == 20
    assert set(r.latency_percentiles_ms) == {"min", "mean", "max"}
    p = h2load_result("http_upload", WorkloadParams(clients=20, method="post"), _run("h2load_post_pyserver.txt"), [])
    _identity(p)
    assert p.successful == 1056 and p.bytes_read == 39072 and p.bytes_written == 1056 * 8192


def test_h2load_4xx_errors_refused():
    r = h2load_result("http_download", WorkloadParams(clients=20), _run("h2load_get_404_pyserver.txt"), [])
    _identity(r)
    assert r.successful == 0 and r.non_2xx == {"4xx": 8900}
    ref = h2load_result("http_download", WorkloadParams(clients=20), _run("h2load_refused.txt"), [])
    _identity(ref)
    assert ref.network_failed == 20 and ref.errors == {"connect": 20}
    notes: list[str] = []
    lost = h2load_result("http_upload", WorkloadParams(clients=10, method="post"), _run("h2load_errors.txt"), notes)
    _identity(lost)
    assert lost.successful == 0
    with pytest.raises(LoadError, match="h2load"):
        h2load_result("http_download", WorkloadParams(), ChildRun(1, "", "", 0, 0, 0, 0.01), [])
