"""Fixtures shared by the runner tests: a real pyftpdlib server on 127.0.0.1 for the session
(``pyftpd``) and targets at it; the local backend, one per session; and for the
tests that need a Docker engine, the engine's client and a docker backend, one of each per
module (every container and volume they make carries this session's label and is removed
when the module ends).

A module that must not build images (it uses the images as they are and is skipped when
one is missing) sets ``DOCKER_BUILD = False``: then the base image is not bootstrapped
either, and the backend is made with ``build=False``.
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


def _builds(request: pytest.FixtureRequest) -> bool:
    """Whether the requesting module lets the fixtures build images (``DOCKER_BUILD``,
    True when the module does not say)."""
    return bool(getattr(request.module, "DOCKER_BUILD", True))


@pytest.fixture(scope="module")
def client(request: pytest.FixtureRequest) -> Iterator:
    """The Docker engine's client (docker.DockerClient), with the Debian base image there
    unless the module sets ``DOCKER_BUILD = False``; the test is skipped with the reason
    when no engine answers. This session's containers and volumes are removed afterwards."""
    c = docker_client_or_skip()
    if _builds(request):
        ensure_base(c)
    yield c
    cleanup_session(c)


@pytest.fixture(scope="module")
def dbackend(request: pytest.FixtureRequest, client):
    """A DockerBackend on :func:`client` whose containers carry this session's label; it
    builds a missing server image unless the module sets ``DOCKER_BUILD = False``."""
    from runner.backends.docker import DockerBackend

    return DockerBackend(client=client, labels={"xferlab.test": SESSION_LABEL}, build=_builds(request),
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
