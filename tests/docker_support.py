"""Shared helpers for tests that need a Docker engine: skip (with the reason) only when
none answers; every container/volume a test makes carries a per-session label and is
removed at the end."""
from __future__ import annotations

import os
import uuid

import pytest

from runner.config import get_settings

#: Label value of this test session's containers (``xferlab.test=<value>``).
SESSION_LABEL = f"pytest-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def docker_client_or_skip():
    """A docker.DockerClient, or pytest.skip with the reason when no engine answers."""
    try:
        import docker
    except ImportError:
        pytest.skip("Docker SDK for Python not installed (pip install 'docker>=7')")
    try:
        c = docker.from_env(timeout=120)
        c.ping()
        return c
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"no Docker engine answers: {type(e).__name__}: {e}")


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
    """Bootstrap the Debian base image once (cached: skipped when the tag exists)."""
    from runner.backends.docker import images

    if not images.image_exists(client, images.BASE_TAG):
        images.bootstrap_base(client=client, progress=lambda m: print(f"[images] {m}"))


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
