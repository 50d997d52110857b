"""Each TLS-capable server, started by the local backend with the campaign's certificates,
completes login + RETR + STOR over FTPS on loopback with the certificate verified
(explicit; implicit where the server has it), under uvloop and asyncio's own loop; a
client holding another CA fails with ``tls_verify`` and the cell records it."""
from __future__ import annotations

import dataclasses

import pytest

from runner.backends.base import ServerSkipped
from runner.backends.local.backend import LocalBackend
from runner.catalogue.servers import FTPS_MODES
from runner.catalogue.workloads import WorkloadParams
from runner.load.base import LoadError
from runner.load.ftp.driver import DRIVER
from runner.spec.request import ServerRequest
from runner.tls.certs import make_certificates
from tests.runner.support import start_or_skip
from tests.support.tls_reference import assert_handshakes_within, reference_handshakes_ms

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CASES = [(s, m) for s, modes in FTPS_MODES.items() for m in modes]
SMALL = dict(duration=0.2, transfer_size=1 << 20, op_timeout=20, connect_timeout=20, phase_timeout=60)


def _start(server: str, mode: str, files):
    """The server started over FTPS ``mode``; skipped as tests.runner.support.start_or_skip
    says (a build that fails is a failure)."""
    return start_or_skip(LocalBackend(auto_fetch=True), ServerRequest(server, variant={"tls": mode}, tls=files))


@pytest.mark.parametrize("server,mode", CASES, ids=[f"{s}-{m}" for s, m in CASES])
def test_login_retr_stor_over_ftps(server, mode, certs):
    h = _start(server, mode, certs)
    try:
        t = h.target
        assert t.tls is not None and t.tls.mode == mode and t.tls.ca_file == str(certs.ca_cert)
        reference = reference_handshakes_ms(t)
        # one session after another: each handshake alone, as the reference's
        login = DRIVER.run("login", t, WorkloadParams(clients=5, login_mode="sequential", **SMALL))
        assert login.ops == 5 and not login.errors, login.notes
        assert len(login.tls_handshake_ms) == 5
        reference += reference_handshakes_ms(t)
        assert_handshakes_within(login.tls_handshake_ms, reference, concurrent=1, server=server)
        assert login.tls["protocol"] in ("TLSv1.2", "TLSv1.3") and login.tls["cipher"], login.tls
        assert login.tls["mode"] == mode and login.tls["key_type"] == "ecdsa-p256"
        for wl in ("retr", "stor"):
            r = DRIVER.run(wl, t, WorkloadParams(**SMALL))
            assert r.ops >= 1 and not r.errors and r.bytes == r.ops * (1 << 20), (wl, r.errors, r.notes)
            assert r.tls["protocol"] in ("TLSv1.2", "TLSv1.3")
        conc = DRIVER.run("retr_concurrent", t, WorkloadParams(clients=3, file_size=256 << 10, **SMALL))
        assert conc.ops == 3 and not conc.errors, conc.notes
    finally:
        h.stop()


def test_both_event_loops(certs, monkeypatch):
    """RETR and STOR over FTPS under each XFERLAB_EVENT_LOOP, and the loop the phase's
    coroutine ran on, seen from inside it (``asyncio.get_running_loop()``), is the one
    asked for: uvloop's ``Loop``, or asyncio's own selector loop."""
    import asyncio

    import uvloop

    from runner.config import get_settings

    seen: list[type] = []

    class ObservedRunner(asyncio.Runner):
        def run(self, coro, **kw):
            async def observed():
                seen.append(type(asyncio.get_running_loop()))
                return await coro

            return super().run(observed(), **kw)

    monkeypatch.setattr(asyncio, "Runner", ObservedRunner)
    h = _start("pyftpdlib", "explicit", certs)
    try:
        for loop in ("asyncio", "uvloop"):
            monkeypatch.setenv("XFERLAB_EVENT_LOOP", loop)
            get_settings.cache_clear()
            assert DRIVER.details() == {"event_loop": loop}
            for wl in ("retr", "stor"):
                seen.clear()
                r = DRIVER.run(wl, h.target, WorkloadParams(**SMALL))
                assert r.ops >= 1 and not r.errors, (loop, wl, r.notes)
                assert seen, f"{loop} {wl}: no phase ran on an event loop"
                if loop == "uvloop":
                    assert all(issubclass(t, uvloop.Loop) for t in seen), (wl, seen)
                else:
                    assert all(issubclass(t, asyncio.SelectorEventLoop) and not issubclass(t, uvloop.Loop)
                               for t in seen), (wl, seen)
    finally:
        h.stop()
        get_settings.cache_clear()


def test_wrong_ca_is_tls_verify_and_the_cell_records_it(certs, tmp_path, monkeypatch):
    from runner.cell.local import run_local_cell
    from runner.config import get_settings
    from runner.spec.model import parse_spec
    from runner.store.models import Cell
    from tests.runner.support import FixedBackend, RunningHandle

    monkeypatch.setenv("XFERLAB_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    other = make_certificates(tmp_path / "other")
    h = _start("pyftpdlib", "explicit", certs)
    try:
        wrong = dataclasses.replace(h.target, tls=dataclasses.replace(h.target.tls, ca_file=str(other.ca_cert)))
        with pytest.raises(LoadError, match="tls_verify: TLS handshake with 127.0.0.1: certificate verify failed"):
            DRIVER.run("login", wrong, WorkloadParams(clients=2, **SMALL))
        spec = parse_spec({"name": "w", "repeats": 1, "warmup": False, "tls": ["explicit"],
                           "servers": [{"name": "pyftpdlib"}],
                           "workloads": [{"name": "login", "params": {"clients": 3, **SMALL}}]})
        srv = spec.servers[0]
        cell = Cell(id=1, campaign_id=1, seq=0, server="pyftpdlib", server_label=srv.display(),
                    server_spec=srv.model_dump(mode="json"), workload="login",
                    params=spec.workloads[0].params.model_dump(mode="json"), params_key="", repeat=0)
        bad = run_local_cell(cell, spec, FixedBackend(RunningHandle(wrong, "pyftpdlib")))
        assert bad.status == "failed" and "tls_verify" in bad.error and "certificate verify failed" in bad.error
        good = run_local_cell(cell, spec, FixedBackend(RunningHandle(h.target, "pyftpdlib")))  # nothing else lost
        assert good.status == "done", good.error
        rows = {(s.metric, s.stat): s for s in good.samples}
        assert rows[("tls", "version")].raw["cipher"] and rows[("tls_handshake", "count")].value == 3
        assert 0 < rows[("tls_handshake", "p50")].value <= rows[("tls_handshake", "p99")].value
    finally:
        h.stop()
        get_settings.cache_clear()


def test_twisted_is_skipped_with_its_reason(certs):
    with pytest.raises(ServerSkipped, match="Twisted's FTP server"):
        LocalBackend().start(ServerRequest("twisted", variant={"tls": "explicit"}, tls=certs))


def test_client_processes_speak_ftps_and_merge_the_handshakes(certs):
    from runner.multihost.processes import run_client_processes

    h = _start("vsftpd", "explicit", certs)
    try:
        r, _ = run_client_processes("login", h.target, WorkloadParams(clients=6, **SMALL), 2)
        assert r.ops == 6 and not r.errors and len(r.tls_handshake_ms) == 6
        assert r.tls["protocol"] in ("TLSv1.2", "TLSv1.3")
    finally:
        h.stop()
