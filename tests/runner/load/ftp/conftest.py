"""Fixtures of the FTP client's tests."""
from __future__ import annotations

import os
import signal
import subprocess

import pytest

from tests.tpd.conftest import BUILD, TPD_DIR, TpdServer


@pytest.fixture(scope="module")
def tpd_server(tmp_path_factory):
    """tpd (built here) serving FTP on loopback for one test module; a test may stop it
    with SIGSTOP: it is continued before it is stopped, and it must exit with status 0."""
    subprocess.run(["make", "-C", str(TPD_DIR), "all"], check=True, capture_output=True, timeout=300)
    srv = TpdServer(BUILD / "tpd", tmp_path_factory.mktemp("tpd"), http=False)
    try:
        yield srv
    finally:
        os.kill(srv.proc.pid, signal.SIGCONT)  # never leave it stopped
        assert srv.stop() == 0
