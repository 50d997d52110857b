"""HTTP servers under the docker backend: the upload-lab interface in a fresh
container per test (netns mode: the test joins the container's network namespace, as
the load generator does), stored_files through /proc/<pid>/root and through ``find``
in the container, the tmpfs storage axis, 413 over max_body.

Every HTTP server's image is built (cold, all six about 6 minutes on two cores: tpd's is
shared with the FTP tests, uvicorn's first layer with the Python FTP servers'; netty's
JDK and go-http's toolchain stage are the largest); skipped with the reason when no
Docker engine answers."""
from __future__ import annotations

import http.client

import pytest

from runner.catalogue.servers import HTTP_SERVERS
from runner.net.netns import call_in_netns
from runner.spec.request import ServerRequest
from tests.runner.backends.http_checks import check_413, check_interface

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(1800)]  # cold image builds

DOCKER_SERVERS = sorted(HTTP_SERVERS)


@pytest.fixture(scope="module", autouse=True)
def _images(dbackend):
    """Every HTTP server's image, built before the first test two at a time (the
    backend's prepare step, as a campaign does); a failed build is that server's error
    in its tests."""
    dbackend.prepare([ServerRequest(n) for n in DOCKER_SERVERS])


def _in_ns(h, fn):
    """Run ``fn`` where the load generator would: in the server's namespace (netns mode)."""
    return call_in_netns(h.target.netns, fn) if h.target.netns else fn()


def _connect(h):
    return lambda: http.client.HTTPConnection(h.target.host, h.target.http_port, timeout=10)


@pytest.mark.parametrize("name", DOCKER_SERVERS)
def test_http_container_interface(dbackend, name):
    h = dbackend.start(ServerRequest(name), cpu=[0])
    try:
        t = h.target
        assert t.http_port == 8080
        assert (t.port == 0) == (name != "tpd"), "only tpd speaks FTP beside HTTP"
        assert (t.root is None) == (name == "tpd"), "an FTP server's home in a container is reached over FTP"
        assert h.build_info["greeting"].startswith("HTTP/1.1" if name != "tpd" else "220") and h.build_info["version"]
        _in_ns(h, lambda: check_interface(name, h, _connect(h)))
        # the same listing through the container (no /proc access): find in the container
        via_proc = h.stored_files()
        h.pid, pid = None, h.pid
        try:
            assert h.stored_files() == via_proc
            with pytest.raises(FileNotFoundError):
                h.stored_files("no-such-folder")
        finally:
            h.pid = pid
    finally:
        h.stop()
    assert not h.alive()


def test_http_container_tmpfs_and_413(dbackend):
    h = dbackend.start(ServerRequest("nginx", variant={"storage": "tmpfs", "max_body": 2048}))
    try:
        assert h.build_info["storage"] == "tmpfs" and h.build_info["storage_fs"] == "tmpfs"
        _in_ns(h, lambda: check_413(h, _connect(h), 2048))
    finally:
        h.stop()
