"""TLS helpers for the tpd tests: a test CA and server certificate made with
the ``cryptography`` package, FTPS clients (explicit AUTH TLS and implicit)
that verify tpd's certificate against that CA, an HTTPS connection, and a
real ClientHello for clients that stall mid-handshake."""
from __future__ import annotations

import datetime
import ftplib
import http.client
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the CA certificate clients trust, tpd's certificate and key."""

    ca: Path
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        """A client context that verifies tpd's certificate (host 127.0.0.1)."""
        return ssl.create_default_context(cafile=str(self.ca))


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_tls_files(d: Path) -> TlsFiles:
    """Write ca.pem, cert.pem and key.pem (ECDSA P-256, valid for one day,
    server certificate for IP 127.0.0.1 and DNS localhost) into d."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(_name("tpd test CA"))
               .issuer_name(_name("tpd test CA")).public_key(ca_key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                            False, False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name("localhost"))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    files = TlsFiles(d / "ca.pem", d / "cert.pem", d / "key.pem")
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                            serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    return files


class ImplicitFTP_TLS(ftplib.FTP_TLS):
    """ftplib's FTP_TLS for implicit FTPS: TLS from the first byte."""

    def connect(self, host="", port=0, timeout=-999, source_address=None):
        self.host, self.port = host, port
        if timeout != -999:
            self.timeout = timeout
        sock = socket.create_connection((host, port), self.timeout)
        self.af = sock.family
        self.sock = self.context.wrap_socket(sock, server_hostname=host)
        self.file = self.sock.makefile("r", encoding=self.encoding)
        self.welcome = self.getresp()
        return self.welcome


def ftps_connect(srv, user: str = "alice", pw: str = "secret", *,
                 implicit: bool = False, prot_p: bool = True) -> ftplib.FTP_TLS:
    """Log in to tpd over explicit (AUTH TLS on srv.ftp_port) or implicit
    (srv.ftps_port) FTPS, verifying the certificate; PROT P unless prot_p
    is False.  Raises ssl.SSLError / ftplib errors as ftplib does."""
    cls = ImplicitFTP_TLS if implicit else ftplib.FTP_TLS
    f = cls(context=srv.tls.client_context(), timeout=20)
    f.connect("127.0.0.1", srv.ftps_port if implicit else srv.ftp_port)
    f.login(user, pw)
    if prot_p:
        f.prot_p()
    return f


def https_conn(srv, timeout: float = 10) -> http.client.HTTPSConnection:
    """An HTTPS connection to srv.https_port that verifies the certificate."""
    return http.client.HTTPSConnection("127.0.0.1", srv.https_port, timeout=timeout,
                                       context=srv.tls.client_context())


def client_hello(ctx: ssl.SSLContext | None = None) -> bytes:
    """The bytes of a real TLS ClientHello (as a client would send first)."""
    ctx = ctx or ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    data = outgoing.read()
    assert data[:1] == b"\x16", data[:10]           # handshake record
    return data
