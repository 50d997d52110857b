"""HTTPS in containers: the docker backend mounts the campaign's certificate folder
(``TLS_MODE=https``, ``TLS_CERT``, ``TLS_KEY``) and each server of
catalogue.DOCKER_HTTPS_SERVERS serves xferlab-http's download and upload workloads over
TLS, verified against the campaign's CA; another CA counts every request as
``tls_verify``. Every HTTPS server of the catalogue (HTTPS_SERVERS) is started in its
container here: one whose container is not wired fails (tpd's serves HTTPS on its HTTP
port with ``--https-listen``). An image built before its entrypoint read ``TLS_MODE`` serves
plain HTTP: the test then fails on the handshake (rebuild: ``xferlab images build NAME``)."""
from __future__ import annotations

import pytest

from runner.catalogue.servers import HTTPS_SERVERS
from runner.spec.request import ServerRequest
from tests.runner.tls.https_checks import check_https_target

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

#: (server, extra variant keys): node-http also with cluster workers.
CASES = [(s, {}) for s in sorted(HTTPS_SERVERS)] + [("node-http", {"workers": 2})]


@pytest.mark.parametrize(("server", "extra"), CASES, ids=[s + "".join(f"-{k}{v}" for k, v in e.items())
                                                          for s, e in CASES])
def test_https_in_a_container(dbackend, certs, server, extra, tmp_path):
    h = dbackend.start(ServerRequest(server, variant={"tls": "https", **extra}, tls=certs), cpu=[0])
    try:
        t = h.target
        assert t.tls is not None and t.tls.mode == "https" and t.http_port
        assert h.build_info["tls_mode"] == "https"
        check_https_target(t, tmp_path)
    finally:
        h.stop()

