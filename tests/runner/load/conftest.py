"""Fixtures for runner/load tests: a real pyftpdlib server on 127.0.0.1 (subprocess),
and tiny asyncio fake FTP peers for failure modes (short transfer, silent server)."""
from __future__ import annotations

import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.load.target import Target
from tests.support import SUPPORT_DIR, ports

HERE = SUPPORT_DIR
USER, PASSWORD = "bench", "s3cret"


def start_pyftpd(home: Path, host: str = "127.0.0.1") -> tuple[subprocess.Popen, int]:
    """Start pyftpd_server.py; return (process, port). Bounded wait of 15 s."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "pyftpd_server.py"), str(home), USER, PASSWORD, host],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 15
    line = ""
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            line = proc.stdout.readline()
            break
        if proc.poll() is not None:
            break
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"pyftpdlib did not start: {line!r} {proc.stderr.read()[:2000]}")
    return proc, int(line.split()[1])


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    """Client-side fixture files go to a per-session temp dir, not the user's cache."""
    monkeypatch.setenv("XFERLAB_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


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


@pytest.fixture
def free_port() -> int:
    """A 127.0.0.1 port nobody listens on (tests.support.ports.free_port)."""
    return ports.free_port()
