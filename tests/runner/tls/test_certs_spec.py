"""FTPS without servers: the campaign's certificates, the ``tls:`` axis and its CLI flag,
the skip reasons of runner.catalogue.pairing, the handshake rows of runner.cell.samples and the TLS
error kinds of runner.load."""
from __future__ import annotations

import socket
import ssl
import stat
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from runner.catalogue.pairing import tls_pair_skip_reason
from runner.cell.samples import phase_samples
from runner.cli import parse_args
from runner.cli.campaign import _build_spec
from runner.load.ftp.driver import DRIVER
from runner.load.ftp.replies import ERROR_KINDS, FTPError
from runner.load.ftp.tls import client_context, tls_error
from runner.load.result import PhaseResult
from runner.spec.model import SpecError, parse_spec
from runner.tls.certs import SERVER_NAME, campaign_certificates, make_certificates


def _handshake(files, ca_file: str, name: str) -> str:
    """One TLS handshake over a socketpair: server with ``files``, client verifying against
    ``ca_file`` and ``name``; returns the negotiated protocol or raises the client's error."""
    a, b = socket.socketpair()
    srv_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    srv_ctx.load_cert_chain(files.cert, files.key)

    def serve() -> None:
        try:
            with srv_ctx.wrap_socket(b, server_side=True):
                pass
        except (ssl.SSLError, OSError):
            pass

    t = threading.Thread(target=serve)
    t.start()
    try:
        with client_context(ca_file).wrap_socket(a, server_hostname=name) as c:
            return c.version()
    finally:
        a.close()
        t.join(10)
        b.close()


@pytest.mark.parametrize("key_type,cls", [("ecdsa-p256", ec.EllipticCurvePrivateKey),
                                          ("rsa-2048", rsa.RSAPrivateKey)])
def test_certificates_verify_by_name_and_keep_keys_private(tmp_path, key_type, cls):
    files = make_certificates(tmp_path / "c", key_type)
    assert files.key_type == key_type and files.server_name == SERVER_NAME
    for p in (files.key, files.chain, tmp_path / "c" / "ca.key"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    leaf = x509.load_pem_x509_certificate(files.cert.read_bytes())
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) == {SERVER_NAME, "localhost"}
    assert {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)} == {"127.0.0.1", "::1"}
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    assert isinstance(load_pem_private_key(files.key.read_bytes(), None), cls)
    assert _handshake(files, str(files.ca_cert), SERVER_NAME) in ("TLSv1.2", "TLSv1.3")
    with pytest.raises(ssl.SSLCertVerificationError):  # a name not in the certificate
        _handshake(files, str(files.ca_cert), "other.example")
    other = make_certificates(tmp_path / "other", key_type)
    with pytest.raises(ssl.SSLCertVerificationError) as e:  # another campaign's CA
        _handshake(files, str(other.ca_cert), SERVER_NAME)
    assert tls_error(e.value, "x").kind == "tls_verify"


def test_campaign_certificates_are_made_once(tmp_path):
    a = campaign_certificates(7, "ecdsa-p256", folder=tmp_path / "c7")
    first = a.cert.read_bytes()
    b = campaign_certificates(7, "ecdsa-p256", folder=tmp_path / "c7")
    assert b == a and b.cert.read_bytes() == first
    with pytest.raises(ValueError, match="unknown TLS key type 'dsa'"):
        campaign_certificates(7, "dsa", folder=tmp_path / "c7")


def _spec(**kw):
    return {"name": "t", "servers": [{"name": "pyftpdlib", "version": "2.2.0"}, {"name": "twisted"}, {"name": "tpd"}],
            "workloads": [{"name": "login"}], **kw}


def test_tls_axis_expands_servers_and_labels():
    assert [s.display() for s in parse_spec(_spec()).servers] == ["pyftpdlib 2.2.0", "twisted", "tpd"]
    spec = parse_spec(_spec(tls=["none", "explicit"]))
    assert [s.display() for s in spec.servers] == [
        "pyftpdlib 2.2.0 [tls=none]", "pyftpdlib 2.2.0 [tls=explicit]", "twisted [tls=none]",
        "twisted [tls=explicit]", "tpd [tls=none]", "tpd [tls=explicit]"]
    again = parse_spec(spec.model_dump(mode="json"))  # stored specs are validated again: idempotent
    assert [s.display() for s in again.servers] == [s.display() for s in spec.servers]
    both = parse_spec(_spec(tls=["implicit"], storage=["disk", "tmpfs"]))
    assert both.servers[0].variant == {"storage": "disk", "tls": "implicit"} and len(both.servers) == 6
    assert parse_spec(_spec(tls=["explicit"])).tls_key == "ecdsa-p256"
    with pytest.raises(SpecError, match="tls.0: Input should be 'none', 'explicit', 'implicit' or 'https'"):
        parse_spec(_spec(tls=["starttls"]))
    with pytest.raises(SpecError, match="tls_key"):
        parse_spec(_spec(tls=["explicit"], tls_key="dsa-1024"))


def test_cli_preset_classic_tls_explicit():
    spec = _build_spec(parse_args(["run", "--preset", "classic", "--tls", "explicit", "--tls-key", "rsa-2048"]))
    assert spec.tls == ["explicit"] and spec.tls_key == "rsa-2048"
    assert spec.servers and all(s.variant.get("tls") == "explicit" for s in spec.servers)
    assert any(s.display().endswith("[tls=explicit]") for s in spec.servers)
    plain = _build_spec(parse_args(["run", "--preset", "classic"]))
    assert all("tls" not in s.variant for s in plain.servers)


def test_pairing_skips_servers_and_workloads_without_ftps():
    assert tls_pair_skip_reason("pyftpdlib", {}, "retr", DRIVER) is None
    assert tls_pair_skip_reason("pyftpdlib", {"tls": "explicit"}, "retr", DRIVER) is None
    assert "Twisted's FTP server" in tls_pair_skip_reason("twisted", {"tls": "explicit"}, "retr", DRIVER)
    assert "explicit FTPS (AUTH TLS) only" in tls_pair_skip_reason("pyftpdlib", {"tls": "implicit"}, "login", DRIVER)
    assert tls_pair_skip_reason("vsftpd", {"tls": "implicit"}, "login", DRIVER) is None
    assert "is FTPS, for FTP workloads" in tls_pair_skip_reason("tpd", {"tls": "explicit"}, "http_download", DRIVER)
    from runner.load.http.driver import DRIVER as HTTP

    assert tls_pair_skip_reason("nginx", {"tls": "https"}, "http_upload", HTTP) is None
    assert "is HTTPS, for HTTP workloads" in tls_pair_skip_reason("tpd", {"tls": "https"}, "retr", DRIVER)
    assert tls_pair_skip_reason("netty", {"tls": "https"}, "http_upload", HTTP) is None
    assert "vsftpd: no HTTPS: vsftpd does not speak HTTP" in tls_pair_skip_reason("vsftpd", {"tls": "https"},
                                                                                 "http_upload", HTTP)
    assert "has no https TLS (xferlab-http has)" in tls_pair_skip_reason("nginx", {"tls": "https"}, "http_upload",
                                                                         DRIVER)

    class Lftp:
        name = "lftp"
    why = tls_pair_skip_reason("vsftpd", {"tls": "explicit"}, "retr", Lftp())
    assert "has no explicit TLS (xferlab-ftp has)" in why


def test_handshake_and_protocol_rows():
    hs = [float(x) for x in range(1, 101)]
    tls = {"mode": "explicit", "key_type": "ecdsa-p256", "protocol": "TLSv1.3", "cipher": "TLS_AES_128_GCM_SHA256",
           "bits": "128"}
    rows = {(s.metric, s.stat): s for s in phase_samples(PhaseResult("login", 1.0, ops=100, latencies_ms=hs,
                                                                     tls_handshake_ms=hs, tls=tls))}
    assert rows[("tls_handshake", "p50")].value == pytest.approx(50.5)
    assert rows[("tls_handshake", "p99")].value == pytest.approx(99.01)
    assert rows[("tls_handshake", "count")].value == 100
    assert rows[("tls", "version")].value == 1.3 and rows[("tls", "version")].raw == tls
    plain = {s.metric for s in phase_samples(PhaseResult("login", 1.0, ops=1, latencies_ms=[1.0]))}
    assert "tls_handshake" not in plain and "tls" not in plain


def test_tls_error_kinds():
    assert {"tls_verify", "tls_timeout", "tls_refused", "tls_error"} <= set(ERROR_KINDS)
    assert tls_error(TimeoutError(), "h").kind == "tls_timeout"
    assert tls_error(ssl.SSLError(1, "no shared cipher"), "h").kind == "tls_error"
    assert tls_error(ConnectionResetError(), "h").kind == "reset"
    assert FTPError("tls_refused", "x").kind == "tls_refused"


def test_docker_container_gets_the_certificates(tmp_path):
    from runner.backends.base import ServerSkipped
    from runner.backends.docker.backend import _tls_problem
    from runner.backends.docker.container import CONTAINER_FTPS_PORT, TLS_DIR, ContainerSettings, container_spec
    from runner.spec.request import ServerRequest

    files = make_certificates(tmp_path / "c")
    settings = ContainerSettings(network="bridge", bind="127.0.0.1", labels={}, nofile=1024)

    def spec(name, mode):
        return container_spec(ServerRequest(name, variant={"tls": mode}, tls=files), settings, image_id="i",
                              image_tag="t", built=False, name="n", password="p", pick_port=lambda: 4242)

    v = spec("vsftpd", "implicit")
    assert v.env["TLS_MODE"] == "implicit" and v.env["TLS_CERT"] == f"{TLS_DIR}/server.pem"
    assert v.kwargs["volumes"][str(files.cert.parent)] == {"bind": TLS_DIR, "mode": "ro"} and v.port == 21
    assert v.info["tls_mode"] == "implicit" and v.info["tls_key_type"] == "ecdsa-p256"
    t = spec("tpd", "implicit")
    assert t.port == CONTAINER_FTPS_PORT and t.env["FTPS_PORT"] == str(CONTAINER_FTPS_PORT)
    assert t.env["FTP_PORT"] == "21"
    assert "TLS_MODE" not in spec("vsftpd", "none").env
    _tls_problem(ServerRequest("vsftpd", variant={"tls": "implicit"}))
    with pytest.raises(ServerSkipped, match="Twisted's FTP server"):
        _tls_problem(ServerRequest("twisted", variant={"tls": "explicit"}))


def test_every_https_server_gets_https_in_its_container(tmp_path):
    """The docker backend accepts ``tls: https`` for every HTTPS server of the catalogue
    and gives its container the HTTPS interface (TLS_MODE=https, the certificate files
    under TLS_DIR, mounted read-only, and an HTTP port); an FTP-only server is refused
    with its reason."""
    from runner.backends.base import ServerSkipped
    from runner.backends.docker.backend import _tls_problem
    from runner.backends.docker.container import TLS_DIR, ContainerSettings, container_spec
    from runner.catalogue.servers import HTTPS_SERVERS
    from runner.spec.request import ServerRequest

    files = make_certificates(tmp_path / "c")
    settings = ContainerSettings(network="bridge", bind="127.0.0.1", labels={}, nofile=1024)
    assert HTTPS_SERVERS, "no HTTPS server in the catalogue"
    for name in sorted(HTTPS_SERVERS):
        req = ServerRequest(name, variant={"tls": "https"}, tls=files)
        _tls_problem(req)
        c = container_spec(req, settings, image_id="i", image_tag="t", built=False, name="n", password="p",
                           pick_port=lambda: 4242)
        assert c.env["TLS_MODE"] == "https" and c.env["TLS_CERT"] == f"{TLS_DIR}/{files.cert.name}", name
        assert c.env["TLS_KEY"] == f"{TLS_DIR}/{files.key.name}", name
        assert c.kwargs["volumes"][str(files.cert.parent)] == {"bind": TLS_DIR, "mode": "ro"}, name
        assert c.http_port and c.env["HTTP_PORT"] == str(c.http_port), name
    with pytest.raises(ServerSkipped, match="vsftpd"):
        _tls_problem(ServerRequest("vsftpd", variant={"tls": "https"}))


class _StallingServer:
    """A TCP server on loopback that greets, answers ``AUTH TLS`` with ``reply`` and then
    says nothing (no TLS handshake), for ``tls_refused`` / ``tls_timeout``."""

    def __init__(self, reply: bytes) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(10)
        try:
            for _ in range(1):  # the test's one session
                c, _ = self.sock.accept()
                self.conns.append(c)
                c.sendall(b"220 stalling\r\n")
                c.settimeout(5)
                if c.recv(100).startswith(b"AUTH TLS"):
                    c.sendall(self.reply)
        except OSError:
            pass

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()
        self.thread.join(10)


@pytest.mark.parametrize("reply,kind", [(b"502 no TLS here\r\n", "tls_refused"), (b"234 go ahead\r\n", "tls_timeout")])
def test_refused_auth_and_stalled_handshake_are_their_kinds(tmp_path, reply, kind):
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.base import LoadError
    from runner.load.target import Target, TargetTls

    files = make_certificates(tmp_path / "c")
    srv = _StallingServer(reply)
    try:
        t = Target("127.0.0.1", srv.port, "u", "p", tls=TargetTls("explicit", str(files.ca_cert), SERVER_NAME,
                                                                   files.key_type))
        with pytest.raises(LoadError, match=f"{kind}: "):
            DRIVER.run("login", t, WorkloadParams(clients=1, connect_timeout=1, op_timeout=2, phase_timeout=10))
    finally:
        srv.close()
