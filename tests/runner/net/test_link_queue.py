"""The shaped link's queue as a parameter (runner.net.conditions, ``queue=`` and the qdisc):
tc in the router namespace shows the configured limit, and a transfer through a small queue
drops packets where a large one does not. Needs root, ip and tc; skipped with the reason
otherwise."""
from __future__ import annotations

import json

from runner.net import link as linknet
from runner.net.conditions import parse_link
from tests.runner.net.test_link import PAYLOAD_MBIT, _steady_mbit, _stream
from tests.support.skips import machine_lacks, not_root, skip_if_problem

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
    with linknet.link_net(parse_link("100mbit")) as net:  # the default: tbf's 50 ms, one qdisc
        [tbf] = _shown(net)
    assert tbf["options"]["lat"] == 50_000 and "limit" not in tbf["options"], tbf  # us


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
            n, secs, trace = _stream(net, 3.0)
            phase = linknet.phase_counters(before, net.qdiscs())
        got[q] = (phase["server_drops"], _steady_mbit(trace, 0.5, 2.5))
    small, large = got["64kb"], got["4mb"]
    assert small[0] >= 10, got
    assert large[0] == 0, got
    assert 0.5 * PAYLOAD_MBIT <= small[1] <= 1.02 * PAYLOAD_MBIT, got
    assert 0.95 * PAYLOAD_MBIT <= large[1] <= 1.02 * PAYLOAD_MBIT, got
    print(f"drops, Mbit/s: {got}")
