"""FTPS in containers: the docker backend mounts the campaign's certificate folder and
each TLS-capable server image completes login + RETR + STOR over explicit FTPS (implicit
where the server has it), the certificate verified against the campaign's CA.

Whether an image can speak TLS is asked of the image itself before the server starts
(:data:`TLS_PROBES`: ``tpd --tls-info``, mod_tls.so, libssl linked, pyOpenSSL importable).
An image without TLS is skipped with the probe's answer (a failure under CI: the install
step builds the images); a server with TLS that fails to start is a failure."""
from __future__ import annotations

import pytest

from runner.catalogue.servers import FTPS_MODES
from runner.catalogue.workloads import WorkloadParams
from runner.load.ftp.driver import DRIVER
from runner.spec.request import ServerRequest
from tests.docker_support import SESSION_LABEL
from tests.runner.support import check_or_skip

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CASES = [(s, m) for s, modes in FTPS_MODES.items() for m in modes]
SMALL = dict(duration=0.2, transfer_size=1 << 20, op_timeout=20, connect_timeout=20, phase_timeout=60)

#: A shell command run in each server's image that exits 0 only when the server there
#: has TLS (its output says why not otherwise).
TLS_PROBES = {
    "tpd": "/usr/local/bin/tpd --tls-info | grep -q '\"tls\": *true' || { /usr/local/bin/tpd --tls-info; exit 1; }",
    "proftpd": "test -f /usr/lib/proftpd/mod_tls.so || { echo /usr/lib/proftpd/mod_tls.so missing; exit 1; }",
    "vsftpd": "ldd /usr/sbin/vsftpd | grep -q libssl || { echo vsftpd not linked with libssl; exit 1; }",
    "pureftpd": "ldd /usr/sbin/pure-ftpd | grep -q libssl || { echo pure-ftpd not linked with libssl; exit 1; }",
    "pyftpdlib": "/opt/venv/bin/python -c 'import OpenSSL' 2>&1 || exit 1",
}


def image_tls_problem(client, tag: str, server: str) -> str | None:
    """None when image ``tag`` of ``server`` has TLS by :data:`TLS_PROBES`, else the
    probe's output (bounded: the probe container is removed, its run capped at 60 s)."""
    import docker.errors

    c = client.containers.run(tag, ["-c", TLS_PROBES[server]], entrypoint=["/bin/sh"], detach=True,
                              labels={"xferlab.test": SESSION_LABEL})
    try:
        code = c.wait(timeout=60).get("StatusCode", 1)
        out = c.logs().decode(errors="replace").strip()
    finally:
        try:
            c.remove(force=True)
        except docker.errors.APIError:
            pass
    return None if code == 0 else (out or f"exit {code}")[-400:]


def test_every_ftps_server_has_a_probe():
    assert set(TLS_PROBES) == set(FTPS_MODES)


@pytest.mark.parametrize("server,mode", CASES, ids=[f"{s}-{m}" for s, m in CASES])
def test_ftps_in_a_container(client, dbackend, certs, server, mode):
    req = ServerRequest(server, variant={"tls": mode}, tls=certs)
    check_or_skip(dbackend, req)  # builds the image when missing; a failed build is not a pass
    tag = dbackend.image(req)[0]
    why = image_tls_problem(client, tag, server)
    if why is not None:
        pytest.skip(f"{server}: image {tag} has no TLS ({why}); rebuild it: xferlab images build {server}")
    h = dbackend.start(req)  # the image has TLS: a start that fails is a failure (ServerFailed)
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
