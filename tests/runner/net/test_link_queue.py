"""The shaped link's queue as a parameter (runner.net.conditions, ``queue=`` and the qdisc):
tc in the router namespace shows the configured limit, and a transfer through a small queue
drops packets where a large one does not. Needs root, ip and tc; skipped with the reason
otherwise."""
from __future__ import annotations

import json
import selectors
import socket
import threading
import time

from runner.metrics.tcpstats import parse_proc_net
from runner.net import link as linknet
from runner.net.conditions import parse_link
from runner.net.netns import call_in_netns
from tests.runner.net.test_link import PAYLOAD_MBIT, _steady_mbit, _stream
from tests.support.skips import machine_lacks, not_root, skip_if_problem
from tests.support.steal import Steal

pytestmark = skip_if_problem(linknet.base_problem(), machine=not_root())


def _shown(net: linknet.LinkNet) -> list[dict]:
    """``tc -s -j qdisc show`` of the router's device towards the client, read back as tc prints it."""
    return json.loads(linknet._run(["tc", "-n", net.router, "-s", "-j", "qdisc", "show", "dev",
                                    linknet.ROUTER_CLIENT_DEV]))


def test_tc_shows_the_configured_queue():
    with linknet.link_net(parse_link("100mbit/queue=96kb")) as net:
        [tbf] = _shown(net)
        text = linknet._run(["tc", "-n", net.router, "-s", "qdisc", "show", "dev", linknet.ROUTER_CLIENT_DEV])
    # iproute2 prints a tbf's limit as the wait it stands for: (limit - burst) / rate
    # (tc/q_tbf.c), the burst as the kernel keeps it (65525 of the 65536 asked, in its ticks)
    burst = tbf["options"]["burst"]
    assert tbf["kind"] == "tbf" and 65000 <= burst <= 65536, tbf
    assert tbf["options"]["lat"] == round((98304 - burst) / 12.5e6 * 1e6), tbf
    assert "lat 2.62ms" in text, text
    with linknet.link_net(parse_link("100mbit/queue=64kb/pfifo")) as net:
        kinds = {q["kind"]: q for q in _shown(net)}
    assert kinds["pfifo"]["options"]["limit"] == 44  # ceil(65536 / 1514) packets
    with linknet.link_net(parse_link("100mbit")) as net:  # the default: 250 ms of tbf, one qdisc
        [tbf] = _shown(net)
        rec = net.record()
    assert tbf["options"]["lat"] == 250_000 and "limit" not in tbf["options"], tbf  # us
    assert rec["link"] == "100mbit/queue=250ms"  # the cell's record names the default queue


def test_fq_codel_queue():
    link = parse_link({"rate": "100mbit", "queue": "20ms", "qdisc": "fq_codel"})
    why = linknet.link_problem(link)
    if why:
        machine_lacks(why)
    with linknet.link_net(link) as net:
        kinds = {q["kind"]: q for q in _shown(net)}
        rec = net.record()
    assert kinds["fq_codel"]["options"]["memory_limit"] == 250_000  # 20 ms at 12.5 MB/s
    assert rec["link"] == "100mbit/queue=20ms/fq_codel" and any("fq_codel memory_limit 250000" in c for c in rec["tc"])


def test_small_queue_drops_where_a_large_one_does_not():
    """One TCP stream for 3 s at 100 Mbit/s: through 64 KiB of queue (one GSO packet)
    CUBIC's window overflows it again and again; through 4 MiB (over the stream's 4 MiB
    socket buffer) nothing is dropped. Both still carry close to the line rate (no delay:
    a short queue refills within a round trip)."""
    got = {}
    for q in ("64kb", "4mb"):
        with linknet.link_net(parse_link(f"100mbit/queue={q}")) as net:
            before = net.qdiscs()
            with Steal() as steal:
                n, secs, trace = _stream(net, 3.0)
            phase = linknet.phase_counters(before, net.qdiscs())
        got[q] = (phase["server_drops"], _steady_mbit(trace, 0.5, 2.5), steal.share)
    small, large = got["64kb"], got["4mb"]
    assert small[0] >= 10, got
    assert large[0] == 0, got
    assert 0.5 * PAYLOAD_MBIT <= small[1] <= 1.02 * PAYLOAD_MBIT, got
    # the lower edge less the host's steal share over the stream (tests/runner/net/test_link.py)
    assert 0.95 * PAYLOAD_MBIT * (1 - large[2]) <= large[1] <= 1.02 * PAYLOAD_MBIT, got
    print(f"drops, Mbit/s: {got}")


PORT = 5002


def _timeouts(path: str) -> int:
    """TcpExt TCPTimeouts (retransmission timeouts) of the namespace at ``path``, read by a
    thread in it (``/proc/thread-self/net`` is the calling thread's namespace)."""
    text = call_in_netns(path, lambda: open("/proc/thread-self/net/netstat").read())
    return parse_proc_net(text)["TcpExt"]["TCPTimeouts"]


def _many_flows(queue: str, flows: int, size: int) -> dict:
    """``flows`` TCP connections from the server namespace to the client namespace of a
    ``100mbit/queue=QUEUE`` link, each sending ``size`` bytes at once (one thread each) to
    one receiver that reads them all (a selector); returns ``{"seconds"`` (first connect to
    the last byte), ``"bytes"``, ``"rto"`` (the senders' namespace's retransmission
    timeouts), ``"drops"`` (the router's qdisc drops)}``. The senders shut down their
    writing side and close only after the receiver has everything: an orphaned socket
    would give up after tcp_orphan_retries timeouts."""
    with linknet.link_net(parse_link(f"100mbit/queue={queue}")) as net:
        ls = call_in_netns(net.server.path, lambda: socket.create_server((net.server.address, PORT),
                                                                            backlog=flows))
        clients = call_in_netns(net.client.path, lambda: [socket.socket() for _ in range(flows)])
        before, rto0 = net.qdiscs(), _timeouts(net.server.path)
        done = threading.Event()
        payload = b"x" * size

        def send() -> None:
            conns = []
            for _ in range(flows):
                conn, _ = ls.accept()
                conns.append(conn)
            threads = [threading.Thread(target=lambda c=c: (c.sendall(payload), c.shutdown(socket.SHUT_WR)))
                       for c in conns]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
            done.wait(timeout=120)
            for c in conns:
                c.close()

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        t0 = time.monotonic()
        sel = selectors.DefaultSelector()
        for c in clients:
            c.connect((net.server.address, PORT))
            c.setblocking(False)
            sel.register(c, selectors.EVENT_READ)
        got, open_ = 0, flows
        deadline = t0 + 120
        while open_ and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1.0):
                data = key.fileobj.recv(1 << 20)
                got += len(data)
                if not data:
                    sel.unregister(key.fileobj)
                    key.fileobj.close()
                    open_ -= 1
        seconds = time.monotonic() - t0
        done.set()
        sender.join(timeout=30)
        ls.close()
        phase = linknet.phase_counters(before, net.qdiscs())
        rto = _timeouts(net.server.path) - rto0
    return {"seconds": seconds, "bytes": got, "rto": rto, "drops": phase["server_drops"]}


def test_rto_count_falls_as_the_queue_grows():
    """Seed 004's cell in small (its sweep at full scale: docs/methodology.md, "The link's
    queue"): 128 flows of 256 KiB start at once through 100 Mbit/s, over a queue of 64 KiB
    (one GSO packet), 50 ms (the old default, 625,000 B), 250 ms (the default, 3,125,000 B)
    and 48 MiB (more than the 35.1 MB of frames the 32 MiB of payload take: nothing can be
    dropped). The retransmission timeouts fall with each step (measured under load 20-38:
    about 600, 250, 13, 0-13). Every run takes at least the payload's time at the rate
    (32 MiB less tbf's first 64 KiB bucket at 95.6 Mbit/s of payload: 2.80 s); the two deep
    queues lose no window to a timeout's wait, so finish within 15% of it (+0.3 s of setup)."""
    flows, size = 128, 256 << 10
    floor_s = (flows * size - (64 << 10)) * 8 / (PAYLOAD_MBIT * 1e6)
    got = {q: _many_flows(q, flows, size) for q in ("64kb", "50ms", "250ms", "48mb")}
    print(f"queue -> seconds, bytes, RTOs, drops: {got}")
    for q, r in got.items():
        assert r["bytes"] == flows * size, (q, r)
        assert r["seconds"] >= floor_s, (q, r, floor_s)
    for q in ("250ms", "48mb"):
        assert got[q]["seconds"] <= 1.15 * floor_s + 0.3, (q, got[q], floor_s)
    rto = {q: r["rto"] for q, r in got.items()}
    assert rto["64kb"] >= flows // 4, rto  # most flows lose a whole window to a queue of 43 frames
    assert rto["64kb"] > 1.5 * rto["50ms"] and rto["50ms"] > 4 * rto["250ms"], rto
    assert rto["48mb"] * 4 < rto["50ms"], rto
    assert got["48mb"]["drops"] == 0 and got["64kb"]["drops"] > 0, got
