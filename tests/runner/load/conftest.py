"""Fixtures of the load tests: client-side fixture files in a per-session folder (not the
user's cache), and a free port. The pyftpdlib server fixtures are in tests/runner/conftest.py."""
from __future__ import annotations

import pytest

from tests.support import ports


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    """Client-side fixture files go to a per-session temp dir, not the user's cache."""
    monkeypatch.setenv("XFERLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def free_port() -> int:
    """A 127.0.0.1 port nobody listens on (tests.support.ports.free_port)."""
    return ports.free_port()
