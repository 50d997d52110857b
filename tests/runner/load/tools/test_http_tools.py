"""The wrk and h2load drivers (and xferlab-http inside a network namespace) against the
tests' upload server on loopback: real runs of the Debian binaries, 1 s each."""
from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.load.ftp.fixtures import server_name
from runner.load.registry import DriverUnavailable, get_driver
from runner.load.target import Target
from runner.load.tools.child import require
from tests.runner.support import driver_or_skip
from tests.support import REPO_ROOT, SUPPORT_DIR
from tests.support.httpserver import HttpTestServer
from tests.support.ports import free_port
from tests.support.skips import lacks_if, not_root

SERVER = SUPPORT_DIR / "httpserver.py"


def _target(port: int, root=None, netns=None) -> Target:
    return Target(host="127.0.0.1", port=1, user="-", password="-", root=root, http_port=port, netns=netns)


def _identity(r) -> None:
    assert r.requests == r.successful + sum(r.non_2xx.values()) + r.network_failed
    assert r.ops == r.successful



def test_missing_binary_message(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(DriverUnavailable, match="apt-get install wrk"):
        get_driver("wrk").check()
    with pytest.raises(DriverUnavailable, match="apt-get install nghttp2-client"):
        get_driver("h2load").check()
    with pytest.raises(DriverUnavailable, match="binary not found"):
        require("wrk", "wrk")


@pytest.mark.parametrize("method", ["put", "post"])
def test_wrk_upload(tmp_path, method):
    d = driver_or_skip("wrk")
    with HttpTestServer(tmp_path) as srv:
        r = d.run("http_upload", _target(srv.port),
                  WorkloadParams(clients=4, duration=1, body_size=1000, method=method))
    _identity(r)
    assert r.successful > 20 and r.network_failed == 0 and not r.non_2xx
    assert r.bytes == r.successful * 1000 and r.bytes_written > r.bytes and r.bytes_read > 0
    assert r.client_cpu_user_s + r.client_cpu_system_s > 0 and r.driver_max_rss > 1 << 20
    files = srv.stored()
    assert r.unfinished is None  # wrk cannot tell: at most one request per connection
    assert r.successful <= len(files) <= r.successful + 4
    assert all(f.stat().st_size == 1000 for f in files)
    assert {"p50", "p95", "p99", "max"} <= set(r.latency_percentiles_ms)
    assert "wrk" in d.version()


def test_wrk_download_413_refused(tmp_path):
    d = driver_or_skip("wrk")
    with HttpTestServer(tmp_path) as srv:
        r = d.run("http_download", _target(srv.port, root=tmp_path), WorkloadParams(clients=2, duration=1,
                                                                                      file_size=50_000))
    _identity(r)
    assert (tmp_path / server_name(50_000)).stat().st_size == 50_000
    assert r.successful > 0 and r.bytes == r.successful * 50_000 and r.bytes_read > r.bytes
    with HttpTestServer(tmp_path, mode="limit", limit=100) as srv:
        r = d.run("http_upload", _target(srv.port), WorkloadParams(clients=2, duration=1, body_size=5000))
    _identity(r)
    assert r.successful == 0 and r.non_2xx.get("4xx-5xx", 0) > 0
    r = d.run("http_upload", _target(free_port()), WorkloadParams(clients=2, duration=1, body_size=10))
    _identity(r)
    assert r.successful == 0 and r.network_failed >= 1 and "refused" in r.errors


def test_h2load_post_and_download(tmp_path):
    d = driver_or_skip("h2load")
    with HttpTestServer(tmp_path) as srv:
        r = d.run("http_upload", _target(srv.port), WorkloadParams(clients=4, duration=0.5, body_size=1000,
                                                                    method="post"))
        g = d.run("http_download", _target(srv.port, root=tmp_path), WorkloadParams(clients=2, duration=0.5,
                                                                                      file_size=50_000))
    for x in (r, g):
        _identity(x)
        assert x.successful > 10 and x.network_failed == 0 and not x.non_2xx and x.driver_max_rss > 0
    files = srv.stored()
    assert r.successful <= len(files) <= r.successful + r.unfinished  # started, not done: may have landed
    assert r.bytes == r.successful * 1000 and g.bytes == g.successful * 50_000
    ref = d.run("http_download", _target(free_port()), WorkloadParams(clients=3, duration=0.3))
    _identity(ref)
    assert ref.successful == 0 and ref.network_failed == 3


def test_h2load_refuses_put_and_no_keepalive():
    d = get_driver("h2load")
    assert "PUT" in d.refuses("http_upload", WorkloadParams(method="put"))
    assert "keepalive" in d.refuses("http_download", WorkloadParams(keepalive=False))
    assert d.refuses("http_upload", WorkloadParams(method="post")) is None
    with pytest.raises(ValueError, match="PUT"):
        d.run("http_upload", _target(1), WorkloadParams(method="put"))
    with pytest.raises(ValueError, match="not 'retr'"):
        d.run("retr", _target(1), WorkloadParams())


@lacks_if(not_root(), "root: unshare --net needs CAP_SYS_ADMIN")
@pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("ip") is None,
                    reason="unshare and ip not installed (util-linux, iproute2)")
@pytest.mark.parametrize("driver", ["xferlab-http", "wrk", "h2load"])
def test_in_a_network_namespace(tmp_path, driver):
    d = driver_or_skip(driver)
    proc = subprocess.Popen(["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"',
                             sys.executable, str(SERVER), str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=str(REPO_ROOT), env={**os.environ, "PYTHONPATH": "."})
    try:
        r, _, _ = select.select([proc.stdout], [], [], 15)
        line = proc.stdout.readline() if r else ""
        assert line.startswith("PORT "), proc.stderr.read()[:2000] if proc.poll() is not None else line
        port = int(line.split()[1])
        ns = f"/proc/{proc.pid}/ns/net"
        res = d.run("http_upload", _target(port, netns=ns), WorkloadParams(clients=2, duration=0.5, body_size=100,
                                                                          method="post"))
        _identity(res)
        assert res.successful > 0 and res.network_failed == 0
        # without joining: nothing listens on that port here
        out = d.run("http_upload", _target(port), WorkloadParams(clients=2, duration=0.3, body_size=100,
                                                                 method="post"))
        assert out.successful == 0 and out.network_failed > 0
    finally:
        proc.kill()
        proc.wait(10)


def test_wrk_without_keepalive_and_a_closing_server(tmp_path):
    d = driver_or_skip("wrk")
    for mode, keep in (("write", False), ("close", True)):
        with HttpTestServer(tmp_path, mode=mode) as srv:
            r = d.run("http_upload", _target(srv.port), WorkloadParams(clients=2, duration=1, body_size=100,
                                                                        keepalive=keep))
        _identity(r)
        assert r.successful > 0 and r.network_failed == 0, (mode, r.errors)
