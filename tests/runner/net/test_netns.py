"""The load generator joins a server's network namespace (Target.netns): the docker
backend's default ``netns`` mode. Here the server is pyftpdlib in a namespace this test
makes (``unshare --net``, only ``lo`` up), listening on 127.0.0.1 *of that namespace*:
reachable only from inside it."""
from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.load.base import LoadError
from runner.load.ftp.workloads import run_workload_sync
from runner.load.target import Target
from runner.net.netns import NetnsError, call_in_netns, can_join_netns
from tests.support import SUPPORT_DIR
from tests.support.pyftpd import PASSWORD, USER, stop
from tests.support.skips import lacks_if, not_root

pytestmark = [lacks_if(not_root(), "root: unshare --net and setns need CAP_SYS_ADMIN"),
              pytest.mark.skipif(shutil.which("unshare") is None or shutil.which("ip") is None,
                                 reason="unshare and ip not installed (util-linux, iproute2)")]


@pytest.fixture
def ns_server(tmp_path: Path):
    """(process, port, netns path) of pyftpdlib in a new network namespace."""
    proc = subprocess.Popen(
        ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"',
         sys.executable, str(SUPPORT_DIR / "pyftpd_server.py"), str(tmp_path), USER, PASSWORD, "127.0.0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r, _, _ = select.select([proc.stdout], [], [], 15)
    line = proc.stdout.readline() if r else ""
    if not line.startswith("PORT "):
        stop(proc)
        pytest.fail(f"pyftpdlib in a new namespace did not start: {line!r} {proc.stderr.read()[:2000]}")
    path = f"/proc/{proc.pid}/ns/net"
    assert os.readlink(path) != os.readlink("/proc/self/ns/net")
    yield proc, int(line.split()[1]), path
    stop(proc)


def test_joining_the_namespace_reaches_a_server_invisible_from_here(ns_server):
    proc, port, path = ns_server
    here = os.readlink("/proc/thread-self/ns/net")
    assert can_join_netns() is None
    target = Target("127.0.0.1", port, USER, PASSWORD, netns=path)
    r = run_workload_sync("login", target, WorkloadParams(clients=20, login_mode="concurrent"))
    assert r.error_count == 0 and r.ops == 20
    # a RETR, fixture uploaded by STOR first, all inside that namespace
    r = run_workload_sync("retr", target, WorkloadParams(transfer_size=4 << 20, duration=0.3))
    assert r.error_count == 0 and r.bytes >= 4 << 20
    # the same address without joining: this namespace's 127.0.0.1 has no such server
    t0 = time.monotonic()
    with pytest.raises(LoadError, match="cannot log in"):
        run_workload_sync("login", replace(target, netns=None),
                          WorkloadParams(clients=2, login_mode="concurrent", connect_timeout=5))
    assert time.monotonic() - t0 < 30
    # the calling thread never left its namespace
    assert os.readlink("/proc/thread-self/ns/net") == here


def test_a_namespace_that_is_gone_is_a_clear_load_error(ns_server):
    proc, port, path = ns_server
    stop(proc)
    with pytest.raises(LoadError, match=r"network namespace /proc/\d+/ns/net"):
        run_workload_sync("login", Target("127.0.0.1", port, USER, PASSWORD, netns=path),
                          WorkloadParams(clients=1))


def test_call_in_netns_returns_and_raises_like_a_call():
    here = os.readlink("/proc/thread-self/ns/net")
    assert call_in_netns("/proc/self/ns/net", lambda: os.readlink("/proc/thread-self/ns/net")) == here
    with pytest.raises(ZeroDivisionError):
        call_in_netns("/proc/self/ns/net", lambda: 1 / 0)
    with pytest.raises(NetnsError, match="/nonexistent"):
        call_in_netns("/nonexistent", lambda: None)
