"""HTTP phases become sample rows: gobench's counters, req/s, wire throughput, latency with p95,
fairness over per-client request counts, CPU per request."""
from __future__ import annotations

import pytest

from runner.cell.samples import headline, phase_samples
from runner.load.result import ClientFigures, PhaseResult


def _rows(result: PhaseResult, **kw) -> dict[tuple[str, str], object]:
    return {(s.metric, s.stat): s for s in phase_samples(result, **kw)}


def test_http_upload_rows():
    r = PhaseResult(workload="http_upload", elapsed_s=2.0, bytes=1000 * 8192, ops=1000,
                    latencies_ms=[float(i) for i in range(1, 101)], errors={"reset": 3},
                    clients=[ClientFigures(0, 2.0, True, 600), ClientFigures(0, 2.0, False, 400)],
                    client_cpu_user_s=0.5, client_cpu_system_s=0.5, requests=1010, successful=1000,
                    network_failed=3, non_2xx={"413": 7}, bytes_read=1 << 20, bytes_written=4 << 20, reconnects=3)
    rows = _rows(r, server_cpu=(1.0, 1.0))
    assert rows[("requests_rate", "value")].value == 500 and rows[("requests_rate", "value")].unit == "req/s"
    assert rows[("http_requests", "total")].value == 1010 and rows[("http_requests", "non_2xx")].value == 7
    assert rows[("http_requests", "network_failed")].value == 3 and rows[("http_status", "413")].value == 7
    assert rows[("read_throughput", "value")].value == pytest.approx(0.5)
    assert rows[("write_throughput", "value")].value == pytest.approx(2.0)
    assert rows[("write_throughput", "value")].unit == "MiB/s"
    assert ("latency", "p95") in rows and rows[("latency", "max")].value == 100
    assert rows[("fairness", "jain")].value == pytest.approx(1000 ** 2 / (2 * (600 ** 2 + 400 ** 2)))
    assert rows[("fairness", "min_requests")].value == 400
    assert rows[("server_cpu_per_op", "value")].value == pytest.approx(2000.0)  # 2 s / 1000 requests, in us
    assert rows[("client_cpu_per_op", "value")].value == pytest.approx(1000.0)
    assert ("server_cpu_per_gib", "value") not in rows
    assert headline(r).startswith("500 req/s, 1010 requests, 3 network failed, 7 non-2xx")


def test_driver_percentiles_and_rss():
    r = PhaseResult(workload="http_download", elapsed_s=1.0, requests=10, successful=10, ops=10,
                    latency_percentiles_ms={"p50": 1.0, "p99": 3.0, "max": 4.0}, driver_max_rss=5 << 20)
    rows = _rows(r)
    assert rows[("latency", "p50")].value == 1.0 and rows[("latency", "max")].value == 4.0
    assert rows[("client_max_rss", "value")].value == 5 << 20


def test_ftp_rows_unchanged():
    r = PhaseResult(workload="login", elapsed_s=1.0, ops=3, latencies_ms=[1.0, 2.0, 3.0])
    rows = _rows(r)
    assert ("latency", "p95") not in rows and ("requests_rate", "value") not in rows
