"""Nothing a server under test says on the runner's side channels can hang the worker:
the readiness probe, the external backend's checks and liveness, and the SIZE/DELE check
of uploads each return within their deadline against a server that drips reply lines,
floods them, says nothing, or drips the answer to PASS (tests/support/hostile_ftp.py),
and a flood's reply is capped (runner.load.bounded)."""
from __future__ import annotations

import socket
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from runner.backends.base import ServerFailed, ServerSkipped
from runner.backends.external import ExternalHandle, check_external, start_external
from runner.backends.probe import ProbeError, http_probe_once, wait_ready
from runner.load.bounded import MAX_HTTP_HEAD, MAX_REPLY_BYTES
from runner.load.target import Target
from runner.load.tools import ftp_tool as ftpclient
from runner.spec.request import ServerRequest
from tests.support.hostile_ftp import MODES, HostileFTP

#: Seconds past a deadline a call may take (thread start-up, the last read's slack).
MARGIN = 1.5


def _call(fn: Callable[[], Any], bound: float) -> tuple[float, Any]:
    """Run ``fn`` in a thread joined for at most ``bound`` s: (seconds taken, its result or
    the exception it raised). Fails the test when it is still running (it would hang)."""
    box: dict[str, Any] = {}

    def run() -> None:
        t0 = time.monotonic()
        try:
            box["out"] = fn()
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            box["out"] = e
        box["took"] = time.monotonic() - t0

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(bound)
    assert not t.is_alive(), f"still running after {bound:g} s: the exchange is not bounded"
    return box["took"], box["out"]


def _ext(port: int) -> ServerRequest:
    return ServerRequest("external", external={"host": "127.0.0.1", "port": port, "user": "u", "password": "p"})


def _causes(mode: str) -> tuple[str, ...]:
    return ("cap",) if mode == "flood" else ("deadline",)


@pytest.mark.parametrize("mode", MODES)
def test_side_channels_end_within_their_deadline(mode, monkeypatch):
    monkeypatch.setattr(ftpclient, "CHECK_TIMEOUT_S", 2.0)
    monkeypatch.setattr(ftpclient, "CHECK_PER_FILE_S", 0.0)
    quick = mode == "flood"  # one attempt ends at the cap at once; a polling wait retries till its deadline
    with HostileFTP(mode) as srv:
        target = Target("127.0.0.1", srv.port, "u", "p")
        notes: list[str] = []
        calls: dict[str, tuple[Callable[[], Any], float, float]] = {  # name: (call, deadline, least time)
            "wait_ready": (lambda: wait_ready("127.0.0.1", srv.port, "u", "p", timeout=2), 2.0, 2.0),
            "start_external": (lambda: start_external(_ext(srv.port), 2), 2.0, 2.0),
            "check_external": (lambda: check_external(_ext(srv.port)), 5.0, 0.0 if quick else 5.0),
            "alive": (lambda: ExternalHandle(target, None, {}).alive(), 3.0, 0.0 if quick else 3.0),
            "server_sizes": (lambda: ftpclient._server_sizes(target, ["a.bin"], [0], notes), 2.0,
                             0.0 if quick else 2.0),
        }
        results: dict[str, tuple[float, Any]] = {}
        threads = [threading.Thread(target=lambda n=n, c=c: results.__setitem__(n, _call(c[0], c[1] + MARGIN)))
                   for n, c in calls.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert set(results) == set(calls), f"hung: {set(calls) - set(results)}"
    for name, (took, out) in results.items():
        _, deadline, least = calls[name]
        assert least - 0.1 <= took <= deadline + MARGIN, (name, took, out)
    text = {n: str(out) for n, (_, out) in results.items()}
    assert isinstance(results["wait_ready"][1], ProbeError)
    assert isinstance(results["start_external"][1], ServerFailed)
    assert isinstance(results["check_external"][1], ServerSkipped)
    assert results["alive"][1] is False
    assert results["server_sizes"][1] == {} and len(notes) == 1
    text["server_sizes"] = notes[0]
    for name in ("wait_ready", "start_external", "check_external", "server_sizes"):
        assert f"127.0.0.1:{srv.port}" in text[name] and any(c in text[name] for c in _causes(mode)), \
            (name, text[name])


def test_flood_is_capped_in_memory():
    """One probe of a flooding server keeps at most the reply cap (64 KiB), not the flood."""
    from runner.backends.probe import probe_once
    from runner.load.bounded import ReplyTooLong

    with HostileFTP("flood") as srv:
        tracemalloc.start()
        try:
            took, out = _call(lambda: probe_once("127.0.0.1", srv.port, "u", "p", timeout=2), 2 + MARGIN)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert isinstance(out, ReplyTooLong) and "(cap)" in str(out), out
    assert took < 2.0 and peak < 8 * MAX_REPLY_BYTES, (took, peak)


def test_http_probe_drip_ends_at_its_deadline():
    """An HTTP server that drips its status line a byte at a time (never a newline) is
    given the probe's deadline, not a per-read timeout per byte."""
    lsock = socket.create_server(("127.0.0.1", 0))
    port = lsock.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        lsock.settimeout(5)
        try:
            conn, _ = lsock.accept()
        except OSError:
            return
        with conn:
            for _ in range(MAX_HTTP_HEAD):  # bounded: at most the cap, one byte per 0.2 s
                if stop.wait(0.2):
                    return
                conn.sendall(b"H")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        took, out = _call(lambda: http_probe_once("127.0.0.1", port, timeout=2), 2 + MARGIN)
    finally:
        stop.set()
        lsock.close()
        t.join(2)
    assert isinstance(out, TimeoutError) and "deadline" in str(out) and f"127.0.0.1:{port}" in str(out), out
    assert 1.9 <= took <= 2 + MARGIN
