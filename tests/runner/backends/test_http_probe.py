"""The HTTP readiness wait (runner.backends.probe.wait_http_ready) against a server on
127.0.0.1 that answers a scripted list of statuses, one per connection: 503 Service
Unavailable is "not ready yet" and polled past; any other status, 4xx and 5xx included,
is ready; a server that says 503 until the deadline fails the wait naming the 503."""
from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from runner.backends.probe import ProbeError, wait_http_ready


@contextmanager
def _scripted(statuses: list[int]) -> Iterator[tuple[int, list[int]]]:
    """A threaded HTTP server answering each request with the next of ``statuses`` (the
    last repeats); yields (port, the statuses sent so far)."""
    sent: list[int] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self) -> None:  # noqa: N802 - the stdlib's name
            status = statuses[min(len(sent), len(statuses) - 1)]
            sent.append(status)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    try:
        yield srv.server_address[1], sent
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(5)


def test_503_is_polled_past_until_the_server_says_otherwise():
    with _scripted([503, 503, 200]) as (port, sent):
        line, waited = wait_http_ready("127.0.0.1", port, timeout=10, interval=0.05)
    assert line.split()[1] == "200" and sent == [503, 503, 200]
    assert 0.05 + 0.075 <= waited < 5, waited  # two pauses (0.05 s, then 1.5 x) between three probes


@pytest.mark.parametrize("status", [200, 403, 404, 500])
def test_any_other_status_is_ready_at_once(status):
    with _scripted([status]) as (port, sent):
        line, waited = wait_http_ready("127.0.0.1", port, timeout=10, interval=0.05)
    assert line.split()[1] == str(status) and sent == [status] and waited < 5


def test_503_until_the_deadline_fails_naming_it():
    with _scripted([503]) as (port, sent):
        with pytest.raises(ProbeError) as e:
            wait_http_ready("127.0.0.1", port, timeout=1.0, interval=0.05)
    assert "503" in str(e.value) and "not ready yet" in str(e.value) and f"127.0.0.1:{port}" in str(e.value)
    assert 3 <= len(sent) <= 40, sent  # 1 s of polling from 0.05 s growing to 0.5 s
