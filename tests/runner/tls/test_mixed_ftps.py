"""The mixed workload over FTPS (explicit, the campaign's certificates, verified) against tpd
and pyftpdlib started by the local backend: every operation kind, listings and transfers
over TLS data connections, one TLS control connection per session (one handshake per
session, not per operation)."""
from __future__ import annotations

import pytest

from runner.backends.local.backend import LocalBackend
from runner.catalogue.workloads import WorkloadParams
from runner.load.ftp.driver import DRIVER
from runner.load.ftp.mixed import op_sequence
from runner.spec.request import ServerRequest
from tests.runner.support import start_or_skip

pytestmark = [pytest.mark.integration]

MIX = {"retr": 3, "stor": 1, "list": 1, "mlsd": 1, "cwd": 1, "size": 1, "mdtm": 1, "dele": 1, "resume": 1, "noop": 1}


@pytest.mark.parametrize("server", ["tpd", "pyftpdlib"])
def test_mixed_over_explicit_ftps(server, certs):
    h = start_or_skip(LocalBackend(auto_fetch=True), ServerRequest(server, variant={"tls": "explicit"}, tls=certs))
    try:
        p = WorkloadParams(clients=2, duration=1.5, mix=MIX, session_ops=8, dir_entries=100, seed=43,
                           sizes={"kind": "buckets", "buckets": {"4KiB": 1, "128KiB": 1}},
                           op_timeout=20, connect_timeout=20, phase_timeout=60)
        r = DRIVER.run("mixed", h.target, p)
        assert not r.errors, (r.errors, r.notes)
        # seed 43: the first sessions of clients 0 and 1 (8 operations each) draw every kind
        first = set(op_sequence(p.mix, 43, 0, 8)) | set(op_sequence(p.mix, 43, 1, 8))
        assert first == set(MIX)
        assert set(r.op_figures) == {"login", *MIX}, r.op_figures.keys()
        assert r.op_figures["list"].items == 100 * r.op_figures["list"].ops
        assert r.op_figures["mlsd"].items == 100 * r.op_figures["mlsd"].ops
        # one TLS handshake per session (its control connection), plus the setup and check sessions
        assert len(r.tls_handshake_ms) == len(r.sessions) + 2
        assert r.tls["protocol"] in ("TLSv1.2", "TLSv1.3")
        moved = sum(r.op_figures[k].bytes for k in ("retr", "stor", "resume"))
        assert sum(b.bytes for b in r.buckets.values()) == moved > 0
    finally:
        h.stop()
