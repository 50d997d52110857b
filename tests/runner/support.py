"""Helpers shared by the runner tests: a server the test started itself, served to
run_local_cell as a backend's handle; a driver or a skip; a check that processes are gone."""
from __future__ import annotations

import time

import psutil
import pytest

from runner.load.registry import DriverUnavailable, get_driver
from runner.load.target import Target
from tests.support.skips import machine_lacks


class RunningHandle:
    """A server the test started itself (on ``target``) as a ServerHandle: no process to
    sample (``pid`` None), always alive, stop() does nothing (the test stops it)."""

    def __init__(self, target: Target, name: str) -> None:
        self.target = target
        self.pid = None
        self.build_info: dict = {"name": name}

    def stop(self) -> None:
        pass

    def alive(self) -> bool:
        return True

    def exit_reason(self) -> None:
        return None

    def cgroup_memory(self) -> None:
        return None

    def cgroup_cpu(self) -> None:
        return None


class FixedBackend:
    """A Backend whose check passes and whose start() returns ``handle``."""

    name = "stub"

    def __init__(self, handle: RunningHandle) -> None:
        self.handle = handle

    def check(self, req) -> None:  # noqa: ANN001
        pass

    def start(self, req, *, cpu=None) -> RunningHandle:  # noqa: ANN001
        return self.handle


def driver_or_skip(name: str):
    """The registered driver ``name``; the test is skipped with its DriverUnavailable
    reason (a missing binary, which the install step provides: a failure under CI)
    when it cannot run here."""
    d = get_driver(name)
    try:
        d.check()
    except DriverUnavailable as e:
        pytest.skip(str(e))
    return d


def check_or_skip(backend, req) -> None:  # noqa: ANN001
    """``backend.check(req)``; the test is skipped with the reason when it raises
    ServerSkipped (a binary missing, no image: a failure under CI, tests.support.skips)
    or MachineLacks (no root, no netem: a skip everywhere). A build that fails raises
    ServerFailed, which reaches the test: a failure, never a skip."""
    from runner.backends.base import MachineLacks, ServerSkipped

    try:
        backend.check(req)
    except MachineLacks as exc:
        machine_lacks(str(exc))
    except ServerSkipped as exc:
        pytest.skip(str(exc))


def start_or_skip(backend, req, **kw):  # noqa: ANN001
    """``backend.start(req, **kw)`` (a ServerHandle) after :func:`check_or_skip`: skipped
    when the server cannot run here; what start() raises (ServerFailed) reaches the test."""
    check_or_skip(backend, req)
    return backend.start(req, **kw)


def local_server_or_skip(name: str) -> None:
    """Skip the test with the local backend's reason (as :func:`check_or_skip`) when
    server ``name`` cannot run as a local process here."""
    from runner.backends import get_backend
    from runner.spec.request import ServerRequest

    check_or_skip(get_backend("local"), ServerRequest(name))


def assert_gone(pids: list[int], *, within_s: float = 0.0) -> None:
    """No pid of ``pids`` is a live (non-zombie) process, checked now and then every
    0.1 s for up to ``within_s`` s (SIGKILL is delivered asynchronously)."""
    deadline = time.monotonic() + within_s
    while True:
        left = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    left.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    assert not left, f"processes left behind: {[(p, _cmdline(p)) for p in left]}"


def _cmdline(pid: int) -> list[str] | str:
    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return "gone"
