"""Fixtures shared by the runner tests: a real pyftpdlib server on 127.0.0.1 for the session
(``pyftpd``) and targets at it; the local backend, one per session; and for the
tests that need a Docker engine, the engine's client and a docker backend, one of each per
module (every container and volume they make carries this session's label and is removed
when the module ends). The docker backend builds a server image a test needs when it is
missing or outdated (cached by content: a no-op once built), so no module depends on
another having built it.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.load.target import Target
from tests.docker_support import SESSION_LABEL, cleanup_session, docker_client_or_skip, ensure_base
from tests.support.pyftpd import PASSWORD, USER, start_pyftpd, stop


@pytest.fixture(scope="session")
def backend():
    """One LocalBackend for the session (venvs, fetched binaries and builds are cached
    under platformdirs user_cache_dir("xferlab"), so reruns are fast)."""
    from runner.backends.local import LocalBackend

    return LocalBackend(progress=lambda m: print(f"[xferlab] {m}"))


@pytest.fixture(scope="module")
def client() -> Iterator:
    """The Docker engine's client (docker.DockerClient), with the Debian base image there
    (bootstrapped when missing); the test is skipped with the reason when no engine
    answers (tests.docker_support). This session's containers and volumes are removed
    afterwards."""
    c = docker_client_or_skip()
    ensure_base(c)
    yield c
    cleanup_session(c)


@pytest.fixture(scope="module")
def dbackend(client):
    """A DockerBackend on :func:`client` whose containers carry this session's label; it
    builds a missing or outdated server image (runner.backends.docker.images)."""
    from runner.backends.docker import DockerBackend

    return DockerBackend(client=client, labels={"xferlab.test": SESSION_LABEL}, build=True,
                         progress=lambda m: print(f"[docker] {m}"))


@pytest.fixture(scope="session")
def ftp_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ftphome")


@pytest.fixture(scope="session")
def pyftpd(ftp_home):
    """A real pyftpdlib server for the whole test session: yields (host, port, home)."""
    proc, port = start_pyftpd(ftp_home)
    try:
        yield "127.0.0.1", port, ftp_home
    finally:
        stop(proc)


@pytest.fixture
def target(pyftpd) -> Target:
    """Target with the home as a local path (fixtures written directly)."""
    host, port, home = pyftpd
    return Target(host=host, port=port, user=USER, password=PASSWORD, root=home)


@pytest.fixture
def remote_target(pyftpd) -> Target:
    """Target without a local root (RETR fixtures uploaded by STOR)."""
    host, port, _ = pyftpd
    return Target(host=host, port=port, user=USER, password=PASSWORD, root=None)
