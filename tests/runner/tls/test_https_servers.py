"""HTTPS (the ``https`` mode of the TLS axis): each HTTP server xferlab configures for it,
started by the local backend with the campaign's certificates, serves xferlab-http's
download and upload workloads over TLS, verified against the campaign's CA; another CA
counts every request as ``tls_verify``."""
from __future__ import annotations

import pytest

from runner.backends.local.backend import LocalBackend
from runner.catalogue.servers import HTTPS_SERVERS
from runner.spec.request import ServerRequest
from tests.runner.support import start_or_skip
from tests.runner.tls.https_checks import check_https_target

pytestmark = [pytest.mark.integration, pytest.mark.slow]



#: (server, extra variant keys): every HTTPS server, and node-http with cluster workers (each
#: worker does its own connections' TLS).
CASES = [(s, {}) for s in sorted(HTTPS_SERVERS)] + [("node-http", {"workers": 2})]


@pytest.mark.parametrize(("server", "extra"), CASES, ids=[s + "".join(f"-{k}{v}" for k, v in e.items())
                                                          for s, e in CASES])
def test_download_and_upload_over_https(server, extra, certs, tmp_path):
    h = start_or_skip(LocalBackend(auto_fetch=True), ServerRequest(server, variant={"tls": "https", **extra},
                                                                   tls=certs))
    try:
        t = h.target
        check_https_target(t, tmp_path)
    finally:
        h.stop()
