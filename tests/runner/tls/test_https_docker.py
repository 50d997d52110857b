"""HTTPS in containers: the docker backend mounts the campaign's certificate folder
(``TLS_MODE=https``, ``TLS_CERT``, ``TLS_KEY``) and each server of
catalogue.DOCKER_HTTPS_SERVERS serves xferlab-http's download and upload workloads over
TLS, verified against the campaign's CA; another CA counts every request as
``tls_verify``. Every HTTPS server's container is wired (tpd's serves HTTPS on its HTTP
port with ``--https-listen``). An image built before its entrypoint read ``TLS_MODE`` serves
plain HTTP: the test then fails on the handshake (rebuild: ``xferlab images build NAME``)."""
from __future__ import annotations

import dataclasses

import pytest

from runner.backends.base import ServerRequest
from runner.backends.catalogue import DOCKER_HTTPS_SERVERS, HTTPS_SERVERS
from runner.backends.certs import campaign_certificates, make_certificates
from runner.drivers.base import LoadError
from runner.drivers.xferlab_http import DRIVER
from runner.workloads import WorkloadParams
from tests.docker_support import SESSION_LABEL, cleanup_session, docker_client_or_skip, ensure_base

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

SMALL = dict(clients=3, duration=0.3, file_size=256 << 10, body_size=64 << 10, op_timeout=20, phase_timeout=60)
#: (server, extra variant keys): node-http also with cluster workers.
CASES = [(s, {}) for s in sorted(DOCKER_HTTPS_SERVERS)] + [("node-http", {"workers": 2})]


@pytest.fixture(scope="module")
def dbackend():
    from runner.backends.docker import DockerBackend

    c = docker_client_or_skip()
    ensure_base(c)
    yield DockerBackend(client=c, labels={"xferlab.test": SESSION_LABEL}, progress=lambda m: print(f"[docker] {m}"))
    cleanup_session(c)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return campaign_certificates("docker-https", folder=tmp_path_factory.mktemp("tls") / "c")


@pytest.mark.parametrize(("server", "extra"), CASES, ids=[s + "".join(f"-{k}{v}" for k, v in e.items())
                                                          for s, e in CASES])
def test_https_in_a_container(dbackend, certs, server, extra, tmp_path):
    h = dbackend.start(ServerRequest(server, variant={"tls": "https", **extra}, tls=certs), cpu=[0])
    try:
        t = h.target
        assert t.tls is not None and t.tls.mode == "https" and t.http_port
        assert h.build_info["tls_mode"] == "https"
        for wl in ("http_download", "http_upload"):
            r = DRIVER.run(wl, t, WorkloadParams(**SMALL))
            assert r.successful > 0 and not r.errors and not r.non_2xx, (wl, r.errors, r.non_2xx, r.notes)
            assert r.tls["protocol"] in ("TLSv1.2", "TLSv1.3") and r.tls["cipher"], r.tls
            assert len(r.tls_handshake_ms) >= 3
        other = make_certificates(tmp_path / "other")
        wrong = dataclasses.replace(t, tls=dataclasses.replace(t.tls, ca_file=str(other.ca_cert)))
        try:
            r = DRIVER.run("http_download", wrong, WorkloadParams(**SMALL))
        except LoadError as e:  # nothing could be measured: the reason names the kind
            assert "tls_verify" in str(e)
        else:
            assert r.successful == 0 and r.errors.get("tls_verify", 0) > 0, r.errors
    finally:
        h.stop()


def test_every_https_server_is_wired_in_its_container():
    assert HTTPS_SERVERS == DOCKER_HTTPS_SERVERS  # else: a skip reason per server, and its test
