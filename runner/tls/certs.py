"""TLS certificates of a campaign: one CA and one server certificate it signed, made with
the ``cryptography`` package and kept under ``<data_dir>/tls/campaign-<id>/`` (key files
mode 0600), so every FTPS cell of a campaign serves the same certificate and the load
generator verifies it against the same CA (``ssl.CERT_REQUIRED``).

The server certificate's subject alternative names are ``localhost``, ``127.0.0.1``,
``::1`` and the fixed DNS name :data:`SERVER_NAME`: the client always verifies against
:data:`SERVER_NAME` (``server_hostname``), so a server reached over any address (loopback,
a veth address, a container's namespace) passes the same check.

Key types (:data:`KEY_TYPES`): ``ecdsa-p256`` (the default; NIST P-256, FIPS 186-4) and
``rsa-2048`` (public exponent 65537). Both certificates are signed with SHA-256, valid from
one hour ago (clock skew) for :data:`VALID_DAYS` days.
"""
from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from filelock import FileLock

#: The DNS name in every server certificate, and the name the client verifies.
SERVER_NAME = "xferlab-server"
#: Key types a campaign's certificates can have, the default first.
KEY_TYPES = ("ecdsa-p256", "rsa-2048")
#: Validity of the CA and server certificates (days).
VALID_DAYS = 30


@dataclass(frozen=True)
class TlsFiles:
    """One campaign's certificate files (PEM), as servers and the client use them.

    Attributes:
        ca_cert: the CA certificate the client verifies against.
        cert: the server certificate (leaf only; the CA is the trust anchor).
        key: the server's private key (PKCS#8, unencrypted, mode 0600).
        chain: the server certificate followed by its key in one file (mode 0600), for
            servers that read both from one file (pure-ftpd's default layout).
        key_type: one of :data:`KEY_TYPES`.
        server_name: the DNS name to verify (:data:`SERVER_NAME`).
    """

    ca_cert: Path
    cert: Path
    key: Path
    chain: Path
    key_type: str
    server_name: str = SERVER_NAME

    def as_dict(self) -> dict[str, str]:
        """The fields as strings (for build_info and JSON)."""
        return {k: str(v) for k, v in asdict(self).items()}


def _private_key(key_type: str) -> ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey:
    if key_type == "ecdsa-p256":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa-2048":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise ValueError(f"unknown TLS key type {key_type!r}; want one of {', '.join(KEY_TYPES)}")


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def make_certificates(folder: Path, key_type: str = KEY_TYPES[0]) -> TlsFiles:
    """Write a new CA and server certificate of ``key_type`` into ``folder`` (made if
    missing; files ``ca.pem``, ``ca.key``, ``server.pem``, ``server.key``,
    ``server-chain.pem``, ``meta.json``), replacing any there.

    Raises:
        ValueError: ``key_type`` is not one of :data:`KEY_TYPES`.
        OSError: the folder cannot be written.
    """
    ca_key = _private_key(key_type)
    key = _private_key(key_type)
    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(hours=1), now + dt.timedelta(days=VALID_DAYS)
    ca_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "xferlab"),
                         x509.NameAttribute(NameOID.COMMON_NAME, f"xferlab campaign CA ({folder.name})")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    sans = [x509.DNSName(SERVER_NAME), x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("::1"))]
    leaf = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "xferlab"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, SERVER_NAME)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    files = TlsFiles(folder / "ca.pem", folder / "server.pem", folder / "server.key", folder / "server-chain.pem",
                     key_type)
    _write(folder / "ca.key", ca_key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()), 0o600)
    _write(files.key, key_pem, 0o600)
    _write(files.chain, leaf.public_bytes(pem) + key_pem, 0o600)
    _write(files.cert, leaf.public_bytes(pem), 0o644)
    _write(files.ca_cert, ca.public_bytes(pem), 0o644)
    _write(folder / "meta.json", json.dumps({"key_type": key_type, "server_name": SERVER_NAME,
                                             "not_after": end.isoformat()}).encode(), 0o644)
    return files


def campaign_folder(campaign_id: int | str, key_type: str = KEY_TYPES[0]) -> Path:
    """``<data_dir>/tls/campaign-<id>-<key type>`` (``XFERLAB_DATA_DIR``, runner.config)."""
    from runner.config import get_settings

    return get_settings().data_dir / "tls" / f"campaign-{campaign_id}-{key_type}"


def campaign_certificates(campaign_id: int | str, key_type: str = KEY_TYPES[0],
                          folder: Path | None = None) -> TlsFiles:
    """The certificates of campaign ``campaign_id`` with ``key_type``: made on first use
    (under a file lock, so parallel workers make them once), read back after. ``folder``
    overrides :func:`campaign_folder` (tests, benchmarks). A folder whose certificate is
    past half its validity is made again.

    Raises:
        ValueError: ``key_type`` is not one of :data:`KEY_TYPES`.
        OSError: the data folder cannot be written.
    """
    if key_type not in KEY_TYPES:
        raise ValueError(f"unknown TLS key type {key_type!r}; want one of {', '.join(KEY_TYPES)}")
    where = folder or campaign_folder(campaign_id, key_type)
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    with FileLock(where.parent / f"{where.name}.lock", timeout=120):
        files = TlsFiles(where / "ca.pem", where / "server.pem", where / "server.key", where / "server-chain.pem",
                         key_type)
        try:
            meta = json.loads((where / "meta.json").read_text())
            fresh = (meta.get("key_type") == key_type and all(p.is_file() for p in (files.ca_cert, files.cert,
                                                                                    files.key, files.chain))
                     and dt.datetime.fromisoformat(meta["not_after"]) - dt.datetime.now(dt.UTC)
                     > dt.timedelta(days=VALID_DAYS / 2))
        except (OSError, ValueError, KeyError):
            fresh = False
        return files if fresh else make_certificates(where, key_type)
