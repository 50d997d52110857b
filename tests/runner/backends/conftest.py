"""Fixtures for backend tests: real servers started by the local backend."""
from __future__ import annotations

import pytest

from runner.backends.local import LocalBackend


@pytest.fixture(scope="session")
def backend() -> LocalBackend:
    """One LocalBackend for the session (venvs, fetched binaries and builds are cached
    under platformdirs user_cache_dir("xferlab"), so reruns are fast)."""
    return LocalBackend(progress=lambda m: print(f"[xferlab] {m}"))
