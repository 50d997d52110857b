"""Fixtures for the TLS tests: the campaign's certificates, as servers get them."""
from __future__ import annotations

import pytest

from runner.tls.certs import TlsFiles, campaign_certificates


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    """A campaign's CA and server certificate (the default key type, ECDSA P-256) in a
    temporary folder, made once per module."""
    return campaign_certificates("test", folder=tmp_path_factory.mktemp("tls") / "c")
