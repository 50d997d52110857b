"""FTPS in containers: the docker backend mounts the campaign's certificate folder and
each TLS-capable server image completes login + RETR + STOR over explicit FTPS (implicit
where the server has it), the certificate verified against the campaign's CA. A server
whose image lacks TLS (an image built before FTPS, tpd built without TLS) fails to start
with the reason in its log, and the test is skipped with it."""
from __future__ import annotations

import pytest

from runner.backends.base import ServerFailed, ServerSkipped
from runner.catalogue.servers import FTPS_MODES
from runner.catalogue.workloads import WorkloadParams
from runner.load.ftp.driver import DRIVER
from runner.spec.request import ServerRequest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CASES = [(s, m) for s, modes in FTPS_MODES.items() for m in modes]
SMALL = dict(duration=0.2, transfer_size=1 << 20, op_timeout=20, connect_timeout=20, phase_timeout=60)


@pytest.mark.parametrize("server,mode", CASES, ids=[f"{s}-{m}" for s, m in CASES])
def test_ftps_in_a_container(dbackend, certs, server, mode):
    try:
        h = dbackend.start(ServerRequest(server, variant={"tls": mode}, tls=certs))
    except ServerSkipped as e:
        pytest.skip(str(e))
    except ServerFailed as e:
        if "mod_tls.so missing" in str(e) or "OpenSSL" in str(e) or "tls-cert" in str(e):
            pytest.skip(f"{server}: the image has no TLS yet (tpd built without TLS, or an image from before "
                        f"FTPS: xferlab images build {server})")
        raise
    try:
        t = h.target
        assert t.tls is not None and t.tls.mode == mode
        login = DRIVER.run("login", t, WorkloadParams(clients=3, **SMALL))
        assert login.ops == 3 and not login.errors and len(login.tls_handshake_ms) == 3, login.notes
        for wl in ("retr", "stor"):
            r = DRIVER.run(wl, t, WorkloadParams(**SMALL))
            assert r.ops >= 1 and not r.errors and r.tls["protocol"] in ("TLSv1.2", "TLSv1.3"), (wl, r.notes)
    finally:
        h.stop()
