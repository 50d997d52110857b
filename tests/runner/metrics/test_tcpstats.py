"""Kernel TCP counters (runner.metrics.tcpstats) read from a real network namespace.

The namespace test makes its own namespace (``ip netns add``, lo up), runs a server
inside it whose socket has ``listen(1)`` and never accepts, and a burst of 50
non-blocking connects from inside the same namespace: the accept queue overflows, so
the kernel must count ListenOverflows > 0 there, and ``ss`` must report backlog 1.
Skipped, with the reason, when not root or ``ip netns`` is unavailable. Every wait is
bounded; the namespace and its processes are removed in a finalizer.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import uuid

import pytest

from runner.metrics.tcpstats import (
    COUNTERS,
    ListenSocket,
    PhaseCounters,
    TcpStatsError,
    counters_delta,
    format_tcp_counters,
    listen_backlogs,
    netns_id,
    parse_proc_net,
    parse_ss_listen,
    read_counters,
)
from tests.support.skips import machine_lacks

# Listens with the backlog given in argv[1] on 127.0.0.1, prints the port, never
# accepts; exits when stdin closes or after 60 s.
SERVER = r"""
import select, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(int(sys.argv[1]))
print(s.getsockname()[1], flush=True)
select.select([sys.stdin], [], [], 60)
"""

# argv: port, n, hold_s. Starts n non-blocking connects at once, holds them hold_s
# seconds (long enough for the kernel's first SYN retransmission after 1 s), closes.
BURST = r"""
import socket, sys, time
port, n, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
socks = []
for _ in range(n):
    c = socket.socket()
    c.setblocking(False)
    c.connect_ex(("127.0.0.1", port))
    socks.append(c)
time.sleep(hold)
for c in socks:
    c.close()
"""


def _start_server(prefix: list[str], backlog: int) -> tuple[subprocess.Popen, int]:
    p = subprocess.Popen([*prefix, sys.executable, "-c", SERVER, str(backlog)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    import select

    ready, _, _ = select.select([p.stdout], [], [], 15)
    if not ready:
        p.kill()
        p.wait(5)
        raise AssertionError("the test server did not print its port within 15 s")
    return p, int(p.stdout.readline())


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.stdin.close()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


@pytest.fixture
def netns():
    """A fresh network namespace with lo up; yields its name; deleted afterwards."""
    if os.geteuid() != 0:
        machine_lacks("root: ip netns add / nsenter need CAP_SYS_ADMIN")
    if shutil.which("ip") is None:
        pytest.skip("iproute2's ip is not installed")
    name = f"xfl-tcpstats-{uuid.uuid4().hex[:8]}"
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=20)
    if r.returncode != 0:
        machine_lacks(f"network namespaces for this process: ip netns add failed: {r.stderr.strip()}")
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True, timeout=20)
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=20)


def test_listen_overflow_counted_in_the_servers_namespace(netns):
    prefix = ["ip", "netns", "exec", netns]
    srv, port = _start_server(prefix, backlog=1)
    try:
        assert netns_id(srv.pid) != netns_id(os.getpid())  # the server really is in the test's namespace
        backlogs = listen_backlogs(srv.pid)  # via nsenter: another namespace
        assert [(b.local, b.backlog) for b in backlogs] == [(f"127.0.0.1:{port}", 1)]
        with PhaseCounters(srv.pid) as pc:
            subprocess.run([*prefix, sys.executable, "-c", BURST, str(port), "50", "2.5"], check=True, timeout=60)
        delta = pc.delta
        # listen(1): the accept queue takes 2 connections; the other 48 overflow, each SYN retried
        assert delta["ListenOverflows"] > 0, delta
        assert delta["ListenDrops"] >= delta["ListenOverflows"]
        assert delta["TCPSynRetrans"] > 0  # client SYNs retried after 1 s (same namespace)
        assert delta["RetransSegs"] >= delta["TCPSynRetrans"]
        assert set(delta) <= set(COUNTERS) and all(v >= 0 for v in delta.values())
        text = format_tcp_counters(delta, backlogs, server="test")
        assert text.startswith(f"test: {delta['ListenOverflows']} listen overflows, "
                               f"{delta['ListenDrops']} listen drops")
        assert text.endswith("; backlog 1")
        # the host namespace's counters are not the ones read
        assert pc.before.netns == netns_id(srv.pid) and pc.before.netns != read_counters(os.getpid()).netns
    finally:
        _stop(srv)


def test_backlog_in_own_namespace_only_the_servers_sockets():
    """Same namespace: ss runs directly, and only the server's own listeners are returned."""
    srv, port = _start_server([], backlog=7)
    other = socket.socket()
    try:
        other.bind(("127.0.0.1", 0))
        other.listen(3)  # a listener of the test process, not of the server
        got = listen_backlogs(srv.pid)
        assert [(b.local, b.backlog, b.queued) for b in got] == [(f"127.0.0.1:{port}", 7, 0)]
        assert listen_backlogs(os.getpid(), children=False)[0].backlog == 3
    finally:
        other.close()
        _stop(srv)


def test_read_counters_of_this_process_and_errors():
    c = read_counters(os.getpid())
    assert c.netns.startswith("net:[") and "ListenOverflows" in c.values and "RetransSegs" in c.values
    assert counters_delta(c, c) == {k: 0 for k in c.values}
    with pytest.raises(ValueError, match="positive int"):
        read_counters(0)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)
    with pytest.raises(TcpStatsError, match=f"no process {dead.pid}"):
        read_counters(dead.pid)
    with pytest.raises(TcpStatsError, match="different network namespaces"):
        counters_delta(c, type(c)(pid=1, netns="net:[1]", values=c.values))


def test_parsers_and_formatter():
    text = "TcpExt: ListenOverflows ListenDrops\nTcpExt: 148 150\nIpExt: InNoRoutes\nIpExt: 0\n"
    assert parse_proc_net(text) == {"TcpExt": {"ListenOverflows": 148, "ListenDrops": 150},
                                    "IpExt": {"InNoRoutes": 0}}
    with pytest.raises(TcpStatsError, match="2 names but 1 values"):
        parse_proc_net("TcpExt: A B\nTcpExt: 1\n", "x")
    ss = ("LISTEN 0      32     0.0.0.0:2121 0.0.0.0:* ino:1658 sk:1 cgroup:/ <->\n"
          "LISTEN 3      128    [::]:21     [::]:*  users:((\"x\",pid=1,fd=3)) ino:99 sk:2 <->\n")
    assert parse_ss_listen(ss) == [ListenSocket("0.0.0.0:2121", 32, 0, 1658), ListenSocket("[::]:21", 128, 3, 99)]
    assert format_tcp_counters({"ListenDrops": 148, "ListenOverflows": 148, "OutRsts": 0}, [32],
                               server="vsftpd") == "vsftpd: 148 listen overflows, 148 listen drops; backlog 32"
    assert format_tcp_counters({"ListenOverflows": 0}, [32]) == ""
    assert format_tcp_counters({"ListenOverflows": 0}, [32, 128, 32], always=True) == "backlogs 32, 128"
    with pytest.raises(ValueError, match="negative"):
        format_tcp_counters({"OutRsts": -1})
