"""xferlab-http against a real (tiny) HTTP server on loopback: counters, per-client counts,
stored files, 413s, reconnects, a refused port; and the response reader on split input."""
from __future__ import annotations

import socket

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.load.ftp.fixtures import server_name
from runner.load.http.response import ResponseError, ResponseReader
from runner.load.registry import get_driver
from runner.load.target import Target
from tests.support.httpserver import HttpTestServer
from tests.support.ports import free_port


def _target(port: int, root=None) -> Target:
    return Target(host="127.0.0.1", port=1, user="-", password="-", root=root, http_port=port)


def _identity(r) -> None:
    assert r.requests == r.successful + sum(r.non_2xx.values()) + r.network_failed
    assert r.ops == r.successful
    assert sum(c.requests for c in r.clients) == r.successful


@pytest.mark.parametrize("method", ["put", "post"])
def test_upload_counts_and_stores(tmp_path, method):
    p = WorkloadParams(clients=4, duration=0.5, body_size=1000, method=method)
    with HttpTestServer(tmp_path) as srv:
        r = get_driver("xferlab-http").run("http_upload", _target(srv.port), p)
    _identity(r)
    assert r.successful > 20 and r.network_failed == 0 and not r.non_2xx
    assert r.bytes == r.successful * 1000
    assert r.bytes_written >= r.successful * 1000
    assert r.bytes_read > 0 and len(r.clients) == 4 and all(c.requests > 0 for c in r.clients)
    assert len(r.latencies_ms) == r.requests
    files = srv.stored()
    # requests in flight at the stop finish and count: the stored files match exactly
    assert r.unfinished == 0 and len(files) == r.successful
    assert all(f.stat().st_size == 1000 for f in files)
    if method == "put":
        assert len({f.name for f in files}) == len(files)


def test_upload_nowrite_server_still_201(tmp_path):
    with HttpTestServer(tmp_path, mode="nowrite") as srv:
        r = get_driver("xferlab-http").run("http_upload", _target(srv.port),
                                           WorkloadParams(clients=2, duration=0.3, body_size=100))
    assert r.successful > 0 and srv.stored() == []


def test_413_counted_as_non_2xx_with_reconnects(tmp_path):
    with HttpTestServer(tmp_path, mode="limit", limit=1000) as srv:
        r = get_driver("xferlab-http").run("http_upload", _target(srv.port),
                                           WorkloadParams(clients=2, duration=0.3, body_size=5000))
    _identity(r)
    assert r.successful == 0 and r.non_2xx.get("413", 0) > 0
    assert r.reconnects > 0  # the server closes after each 413


def test_download_and_chunked(tmp_path):
    size = 100_000
    for mode in ("write", "chunked"):
        with HttpTestServer(tmp_path, mode=mode) as srv:
            r = get_driver("xferlab-http").run("http_download", _target(srv.port, root=tmp_path),
                                               WorkloadParams(clients=3, duration=0.3, file_size=size))
        _identity(r)
        assert (tmp_path / server_name(size)).stat().st_size == size
        assert r.successful > 0 and r.bytes == r.successful * size and r.network_failed == 0


def test_connection_close_server_reconnects(tmp_path):
    with HttpTestServer(tmp_path, mode="close") as srv:
        r = get_driver("xferlab-http").run("http_upload", _target(srv.port),
                                           WorkloadParams(clients=2, duration=0.3, body_size=10))
    _identity(r)
    assert r.successful > 0 and r.reconnects >= r.successful - 2


def test_no_keepalive(tmp_path):
    with HttpTestServer(tmp_path) as srv:
        r = get_driver("xferlab-http").run("http_upload", _target(srv.port),
                                           WorkloadParams(clients=2, duration=0.3, body_size=10, keepalive=False))
    _identity(r)
    assert r.successful > 0 and r.reconnects == 0


def test_refused_port_is_network_failed():
    port = free_port()  # nothing listens there
    r = get_driver("xferlab-http").run("http_upload", _target(port),
                                       WorkloadParams(clients=2, duration=0.2, body_size=10))
    _identity(r)
    assert r.successful == 0 and r.network_failed > 0 and r.errors.get("refused") == r.network_failed


def test_not_an_http_workload():
    with pytest.raises(ValueError, match="not 'retr'"):
        get_driver("xferlab-http").run("retr", _target(1), WorkloadParams())
    with pytest.raises(ValueError, match="no HTTP port"):
        get_driver("xferlab-http").run("http_upload", Target("127.0.0.1", 21, "u", "p"), WorkloadParams())


def test_reader_split_and_chunked():
    raw = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello"
           b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
           b"3;x=1\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
           b"HTTP/1.1 204 No Content\r\n\r\n")
    for step in (1, 2, 7, len(raw)):
        rd, got = ResponseReader(), []
        for i in range(0, len(raw), step):
            if rd.feed(raw[i:i + step]):
                got.append((rd.status, rd.body_bytes, rd.close))
                rd.reset()
                while rd.feed(b""):  # responses already buffered
                    got.append((rd.status, rd.body_bytes, rd.close))
                    rd.reset()
        assert got == [(201, 5, False), (200, 5, True), (204, 0, False)], step
    with pytest.raises(ResponseError):
        ResponseReader().feed(b"SSH-2.0-OpenSSH\r\n\r\n")


def test_big_body_in_slices(tmp_path):
    size = 3 * (1 << 20) + 5  # more than runner.load.http.client.BODY_SLICE: sent in slices with flow control
    with HttpTestServer(tmp_path) as srv:
        r = get_driver("xferlab-http").run("http_upload", _target(srv.port),
                                           WorkloadParams(clients=2, duration=0.5, body_size=size))
    _identity(r)
    assert r.successful > 0 and r.network_failed == 0
    assert all(f.stat().st_size == size for f in srv.stored())


def test_silent_server_times_out():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)  # accepts (kernel backlog) but never answers
    try:
        r = get_driver("xferlab-http").run("http_upload", _target(s.getsockname()[1]),
                                           WorkloadParams(clients=2, duration=0.6, body_size=10, op_timeout=0.2))
    finally:
        s.close()
    _identity(r)
    assert r.successful == 0 and r.errors.get("timeout", 0) >= 2 and r.network_failed == sum(r.errors.values())


def test_early_413_to_a_big_body(tmp_path):
    with HttpTestServer(tmp_path, mode="limit", limit=1000) as srv:
        r = get_driver("xferlab-http").run("http_upload", _target(srv.port),
                                           WorkloadParams(clients=2, duration=0.4, body_size=2 << 20))
    _identity(r)
    # the server answers 413 and closes before reading the body: the answer, or a reset, ends each request
    assert r.successful == 0 and r.requests > 0 and set(r.non_2xx) <= {"413"}


def test_latency_percentiles_of_a_server_with_a_fixed_delay():
    """Against a server that answers every GET exactly D = 40 ms after reading it (a timer
    on its event loop, in its own process: tests/support/delay_http.py), each request's
    latency is D plus the loopback round trip and the 1 KiB body: the stored p50 and p99
    lie in [D, D + 5 ms] and [D, D + 15 ms] (the server's timer fires about 1 ms late on an
    idle machine; the rest is room for a busy one). 4 clients for 1 s."""
    from runner.cell.samples import phase_samples
    from tests.support.delay_http import delay_server

    d_ms = 40.0
    with delay_server(d_ms, 1024) as port:
        r = get_driver("xferlab-http").run("http_download", _target(port),
                                           WorkloadParams(clients=4, duration=1.0, file_size=1024))
    _identity(r)
    # no request is faster than D: at most 4 clients x 1 s / D, plus the 4 in flight at the stop
    assert r.network_failed == 0 and not r.non_2xx and 40 <= r.successful <= 4 * 1000 / d_ms + 4, r.successful
    rows = {(s.metric, s.stat): s for s in phase_samples(r)}
    p50, p99 = rows[("latency", "p50")], rows[("latency", "p99")]
    assert p50.unit == "ms"
    assert d_ms <= p50.value <= d_ms + 5.0, p50.value
    assert d_ms <= p99.value <= d_ms + 15.0, p99.value
