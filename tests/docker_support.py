"""Shared helpers for tests that need a Docker engine. When no engine answers (no socket,
no daemon) the test is skipped with the reason: a failure under CI, where the install
step provides the engine (tests.support.skips). An engine this process may not reach
(permission denied on its socket) fails the test everywhere, naming the socket. Every
container/volume a test makes carries a per-session label and is removed at the end."""
from __future__ import annotations

import errno
import os
import uuid

import pytest

from runner.config import get_settings

#: Label value of this test session's containers (``xferlab.test=<value>``).
SESSION_LABEL = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:6]}"
#: Where the Docker SDK looks when DOCKER_HOST is unset.
DEFAULT_SOCKET = "unix:///var/run/docker.sock"


def docker_endpoint(environ: dict[str, str] | None = None) -> str:
    """The engine address the Docker SDK uses: ``DOCKER_HOST`` from ``environ`` (default
    ``os.environ``), else :data:`DEFAULT_SOCKET`."""
    env = os.environ if environ is None else environ
    return env.get("DOCKER_HOST") or DEFAULT_SOCKET


def permission_denied(exc: BaseException) -> bool:
    """Whether ``exc`` or an exception in its chain (``__cause__``/``__context__``, or the
    arguments of requests' ConnectionError, which wraps the OSError) is EACCES/EPERM."""
    seen: set[int] = set()
    todo: list[object] = [exc]
    while todo:
        e = todo.pop()
        if isinstance(e, tuple) and len(todo) < 50:
            todo += e
            continue
        if not isinstance(e, BaseException) or id(e) in seen or len(seen) > 50:
            continue
        seen.add(id(e))
        if isinstance(e, PermissionError) or (isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EPERM)):
            return True
        todo += [e.__cause__, e.__context__, *e.args]
    return "Permission denied" in str(exc)


def docker_client_or_skip():
    """A docker.DockerClient that answered a ping.

    Skips with the reason when the Docker SDK is not installed or no engine answers at
    :func:`docker_endpoint` (both a failure under CI); fails, naming the socket, when the
    engine's socket refuses this process (permission denied)."""
    try:
        import docker
    except ImportError:
        pytest.skip("Docker SDK for Python not installed (pip install 'docker>=7')")
    endpoint = docker_endpoint()
    try:
        c = docker.from_env(timeout=120)
        c.ping()
        return c
    except Exception as e:  # noqa: BLE001
        if permission_denied(e):
            pytest.fail(f"the Docker engine's socket {endpoint} refuses this process (uid {os.geteuid()}): "
                        f"permission denied ({type(e).__name__}: {e}). Run the tests as root or as a member "
                        f"of the socket's group (docker), or point DOCKER_HOST at a socket this process may open.",
                        pytrace=False)
        pytest.skip(f"no Docker engine answers at {endpoint}: {type(e).__name__}: {e}")


def engine_and_compose():
    """(Docker client, compose command line as runner.backends.docker.images.compose_command gives it);
    pytest.skip with the reason when no engine answers or no Compose is installed."""
    from runner.backends.docker import images

    client = docker_client_or_skip()
    try:
        return client, images.compose_command()
    except images.ImageError as e:
        pytest.skip(str(e))


def ensure_base(client) -> None:
    """Bootstrap the Debian base image once (cached: skipped when the tag exists; one process at a
    time: runner.backends.docker.images.ensure_base)."""
    from runner.backends.docker import images

    images.ensure_base(client, progress=lambda m: print(f"[images] {m}"))


def ensure_images(client, servers=(), labs=()) -> None:
    """Build the server images ``servers`` (names, default versions) and the lab images
    ``labs`` (tags) that are missing or outdated, two at a time
    (runner.backends.docker.images); raises the first build's ImageError, so a fixture
    that needs them errors with the build log's reason."""
    from runner.backends.docker import images

    got = [*images.ensure_lab_images(list(labs), client=client, progress=print).values()] if labs else []
    if servers:
        got += images.ensure_server_images([(name, None) for name in servers], client=client,
                                           progress=print).values()
    for res in got:
        if isinstance(res, images.ImageError):
            raise res


def cleanup_session(client) -> None:
    """Remove every container and volume labelled with this session's label."""
    from runner.backends.docker import cleanup

    cleanup(client, label="xferlab.test", value=SESSION_LABEL)


def container_usage_usec(container_id: str) -> int:
    """The container cgroup's CPU usage, microseconds, read independently of
    runner.metrics: the engine's folder named after the container id (cgroupfs
    ``docker/<id>``, systemd ``docker-<id>.scope``), v2 ``cpu.stat`` ``usage_usec`` or
    v1 ``cpuacct.usage`` (ns). Raises LookupError when no such folder is visible."""
    root = get_settings().cgroup_root
    for base, name in ((root / "unified", "cpu.stat"), (root, "cpu.stat"), (root / "cpuacct", "cpuacct.usage"),
                       (root / "cpu,cpuacct", "cpuacct.usage")):
        for d in (base / "docker" / container_id, base / "system.slice" / f"docker-{container_id}.scope"):
            f = d / name
            if f.exists():
                text = f.read_text()
                if name == "cpuacct.usage":
                    return int(text) // 1000
                return next(int(v) for k, _, v in (ln.partition(" ") for ln in text.splitlines()) if k == "usage_usec")
    raise LookupError(f"no cgroup folder of container {container_id[:12]} under {root}")
