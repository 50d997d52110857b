"""HTTPS (the ``https`` mode of the TLS axis): each HTTP server xferlab configures for it,
started by the local backend with the campaign's certificates, serves xferlab-http's
download and upload workloads over TLS, verified against the campaign's CA; another CA
counts every request as ``tls_verify``."""
from __future__ import annotations

import dataclasses

import pytest

from runner.backends.base import ServerRequest, ServerSkipped
from runner.backends.catalogue import HTTPS_SERVERS
from runner.backends.certs import campaign_certificates, make_certificates
from runner.backends.local.backend import LocalBackend
from runner.drivers.base import LoadError
from runner.drivers.xferlab_http import DRIVER
from runner.workloads import WorkloadParams

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SMALL = dict(clients=3, duration=0.3, file_size=256 << 10, body_size=64 << 10, op_timeout=20, phase_timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return campaign_certificates("https", folder=tmp_path_factory.mktemp("tls") / "c")


#: (server, extra variant keys): every HTTPS server, and node-http with cluster workers (each
#: worker does its own connections' TLS).
CASES = [(s, {}) for s in sorted(HTTPS_SERVERS)] + [("node-http", {"workers": 2})]


@pytest.mark.parametrize(("server", "extra"), CASES, ids=[s + "".join(f"-{k}{v}" for k, v in e.items())
                                                          for s, e in CASES])
def test_download_and_upload_over_https(server, extra, certs, tmp_path):
    try:
        h = LocalBackend(auto_fetch=True).start(ServerRequest(server, variant={"tls": "https", **extra}, tls=certs))
    except ServerSkipped as e:
        pytest.skip(str(e))
    try:
        t = h.target
        assert t.tls is not None and t.tls.mode == "https"
        for wl in ("http_download", "http_upload"):
            r = DRIVER.run(wl, t, WorkloadParams(**SMALL))
            assert r.successful > 0 and not r.errors and not r.non_2xx, (wl, r.errors, r.non_2xx, r.notes)
            assert r.tls["protocol"] in ("TLSv1.2", "TLSv1.3") and r.tls["cipher"], r.tls
            assert len(r.tls_handshake_ms) >= 3 and all(0.05 < x < 20_000 for x in r.tls_handshake_ms)
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
