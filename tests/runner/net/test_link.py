"""A real shaped link between two namespaces (runner.net.link): the measured
throughput of a 100 Mbit link, an unshaped one, the qdisc counters, teardown and the
skip reasons. Needs root, ip and tc; skipped with the reason otherwise."""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from runner.net import link as linknet
from runner.net.conditions import parse_link
from runner.net.netns import call_in_netns
from tests.support.skips import not_root, skip_if_problem

pytestmark = skip_if_problem(linknet.base_problem(), machine=not_root())

PORT = 5001


def _mine() -> list[str]:
    return [n for n in linknet.lab_namespaces() if n.startswith(f"xl-{os.getpid()}-")]


def _stream(net: linknet.LinkNet, seconds: float) -> tuple[int, float]:
    """Send from the server namespace to the client namespace for ``seconds`` s over TCP;
    return (bytes received, seconds from the first to the last byte)."""
    ls = call_in_netns(net.server.path, lambda: socket.create_server((net.server.address, PORT)))

    def send() -> None:
        conn, _ = ls.accept()
        buf = b"x" * (1 << 16)
        end = time.monotonic() + seconds
        with conn:
            while time.monotonic() < end:
                conn.sendall(buf)

    t = threading.Thread(target=send, daemon=True)
    t.start()

    def receive() -> tuple[int, float]:
        with socket.create_connection((net.server.address, PORT), timeout=10) as c:
            got = c.recv(1 << 16)
            t0 = time.monotonic()
            n = 0
            while got:
                n += len(got)
                got = c.recv(1 << 20)
            return n, time.monotonic() - t0

    try:
        return call_in_netns(net.client.path, receive)
    finally:
        t.join(timeout=seconds + 10)
        ls.close()


def test_100mbit_link_measures_100mbit():
    with linknet.link_net(parse_link("100mbit")) as net:
        assert len(_mine()) == 3  # client, router, server
        before = net.qdiscs()
        n, secs = _stream(net, 3.0)
        after = net.qdiscs()
    mbit = n * 8 / secs / 1e6
    # TCP payload: tbf counts whole Ethernet frames (1448 payload bytes in 1514), so ~95.6
    assert 90.0 <= mbit <= 110.0, f"{mbit:.1f} Mbit/s over a 100mbit link"
    assert after["server"][0]["kind"] == "tbf" and after["server"][0]["options"]["rate"] == 12_500_000
    phase = linknet.phase_counters(before, after)
    assert phase["server_sent_bytes"] >= n  # payload plus headers went through the server's tbf
    assert phase["client_sent_bytes"] < n / 10  # only ACKs the other way
    assert _mine() == []


def test_unshaped_veth_is_much_faster():
    with linknet.link_net(parse_link("100gbit")) as net:
        n, secs = _stream(net, 1.0)
    assert n * 8 / secs / 1e6 > 300, "the veth without a limit should be far above 100 Mbit/s"


def test_teardown_when_the_body_raises():
    with pytest.raises(RuntimeError, match="boom"):
        with linknet.link_net(parse_link("10mbit")) as net:
            assert os.path.exists(net.client.path) and os.path.exists(net.server.path)
            raise RuntimeError("boom")
    assert _mine() == []
    import subprocess

    host_links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    assert "xl-client" not in host_links and "xl-server" not in host_links  # the veth never was in this namespace


def test_failed_creation_deletes_what_it_made(monkeypatch):
    real = linknet._run

    def failing(argv):
        if argv[:2] == ["tc", "-n"]:
            raise linknet.LinkFailed("tc: injected failure")
        return real(argv)

    monkeypatch.setattr(linknet, "_run", failing)
    with pytest.raises(linknet.LinkFailed, match="injected"):
        linknet.open_link(parse_link("10mbit"))
    assert _mine() == []


def test_stale_namespaces_of_dead_processes_are_swept():
    import subprocess

    p = subprocess.Popen(["true"])
    p.wait()  # a pid that no longer runs
    name = f"xl-{p.pid}-0-c"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert name in linknet.sweep_stale()
        assert name not in linknet.lab_namespaces()
    finally:
        if os.path.exists(f"/run/netns/{name}"):
            subprocess.run(["ip", "netns", "delete", name])


def test_delay_needs_netem_or_is_applied():
    why = linknet.link_problem(parse_link("100mbit/1ms"))
    if why is not None:  # this kernel has no netem: the cell is skipped with this reason
        assert "netem" in why
        with pytest.raises(linknet.LinkUnavailable, match="netem"):
            linknet.open_link(parse_link("1ms"))
        assert _mine() == []
        return
    with linknet.link_net(parse_link("100mbit/1ms")) as net:
        kinds = [q["kind"] for q in net.qdiscs()["server"]]
    assert kinds[:2] == ["netem", "tbf"]


def test_each_end_records_its_own_namespace_sysctls():
    import subprocess

    with linknet.link_net(parse_link("10mbit")) as net:
        rec = net.record()
        assert rec["server_namespace"] == "lab" and rec["link"] == "10mbit"
        assert set(rec["sysctls"]) == {"client", "server"}
        assert rec["sysctls"]["server"]["net.core.somaxconn"].isdigit()
        assert rec["sysctls"]["client"]["net.ipv4.tcp_congestion_control"]
        subprocess.run(["ip", "netns", "exec", net.server.netns, "sysctl", "-qw", "net.core.somaxconn=777"],
                       check=True)
        assert linknet.ns_sysctls(net.server.path)["net.core.somaxconn"] == "777"
        assert linknet.ns_sysctls(net.client.path)["net.core.somaxconn"] != "777"
    with open("/proc/sys/net/core/somaxconn") as f:
        assert f.read().strip() != "777"  # the runner's own namespace untouched


def test_rate_needs_no_netem():
    assert linknet.link_problem(parse_link("100mbit")) is None
    assert linknet.link_problem(parse_link("loopback")) is None


def test_lab_server_namespace_has_syn_cookies_off():
    """As the docker backend's containers (methodology, "Slow is a figure"); the client's
    namespace keeps the kernel's default."""
    with linknet.link_net(parse_link("100mbit")) as net:
        assert net.sysctls["server"]["net.ipv4.tcp_syncookies"] == "0"
        assert net.sysctls["client"]["net.ipv4.tcp_syncookies"] == "1"
