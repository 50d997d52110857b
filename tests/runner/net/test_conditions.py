"""Link conditions: the spec's text and mapping forms, their errors, and the tc argv
each link stands for (runner.net.conditions). Plain data: runs nothing."""
from __future__ import annotations

import pytest

from runner.net.conditions import (
    LOOPBACK,
    LinkError,
    LinkSpec,
    link_text,
    parse_link,
    parse_qdisc_json,
    qdisc_argvs,
)


@pytest.mark.parametrize("given, want", [
    ("loopback", LOOPBACK),
    ("LOOPBACK", LOOPBACK),
    ({}, LOOPBACK),
    ("100mbit", LinkSpec(100_000_000)),
    ("1gbit", LinkSpec(1_000_000_000)),
    ("2.5mbit", LinkSpec(2_500_000)),
    ("512kbit", LinkSpec(512_000)),
    ("100mbit/1ms", LinkSpec(100_000_000, 0.001)),
    ("1ms/100mbit", LinkSpec(100_000_000, 0.001)),
    ("100mbit/1ms/0.1%", LinkSpec(100_000_000, 0.001, 0.1)),
    ("250us/2%", LinkSpec(None, 0.00025, 2.0)),
    ({"rate": "100mbit", "delay": "1ms", "loss": 0}, LinkSpec(100_000_000, 0.001, 0.0)),
    ({"rate": "100mbit", "loss": "0.5%"}, LinkSpec(100_000_000, 0.0, 0.5)),
    ({"delay": "20ms"}, LinkSpec(None, 0.02)),
    ({"rate": "100mbit", "delay": "0", "loss": "0"}, LinkSpec(100_000_000)),
])
def test_parse(given, want):
    assert parse_link(given) == want


@pytest.mark.parametrize("given, text", [
    ("loopback", "loopback"), ("100mbit", "100mbit/queue=250ms"), ("100000kbit", "100mbit/queue=250ms"),
    ("2.5mbit", "2500kbit/queue=250ms"), ({"rate": "100mbit", "delay": "1ms", "loss": 0}, "100mbit/1ms/queue=250ms"),
    ("1ms/0.1%/100mbit", "100mbit/1ms/0.1%/queue=250ms"), ("100mbit/queue=50ms", "100mbit/queue=50ms"),
    ("1500us", "1500us"), ("1s", "1s"),
])
def test_canonical_text_round_trips(given, text):
    assert link_text(given) == text
    assert parse_link(text).text() == text


@pytest.mark.parametrize("given, words", [
    ("100mbps", "bytes per second"),
    ("100", "no rate"),
    ("fast", "no rate"),
    ("100mbit/200mbit", "two rate"),
    ("1kbit", "8kbit to 100gbit"),
    ("200gbit", "8kbit to 100gbit"),
    ("11s", "at most 10s"),
    ("0.5us", "whole microseconds"),
    ("100%", "0 <= loss < 100"),
    ({"rate": "100mbit", "jitter": "1ms"}, "unknown link key jitter"),
    ({"loss": True}, "percentage"),
    ({"delay": "1"}, "s, ms or us"),
    ("", "want 'loopback'"),
    (42, "want 'loopback'"),
])
def test_errors_name_the_problem(given, words):
    with pytest.raises(LinkError, match=words):
        parse_link(given)


def test_burst_is_a_gso_packet_or_a_millisecond():
    assert LinkSpec(100_000_000).burst_bytes() == 65536  # 1 ms at 100 Mbit/s is 12.5 kB
    assert LinkSpec(10_000_000_000).burst_bytes() == 1_250_000  # 1 ms at 10 Gbit/s
    with pytest.raises(LinkError):
        LinkSpec(None, 0.001).burst_bytes()


def test_rate_only_is_one_tbf():
    assert qdisc_argvs(parse_link("100mbit"), "xl-server", "ns1") == [
        ["tc", "-n", "ns1", "qdisc", "add", "dev", "xl-server", "root", "handle", "1:",
         "tbf", "rate", "100000000bit", "burst", "65536", "latency", "250000us"]]


def test_delay_and_loss_is_netem_with_tbf_below():
    assert qdisc_argvs(parse_link("100mbit/1ms/0.1%"), "xl-client", "ns2") == [
        ["tc", "-n", "ns2", "qdisc", "add", "dev", "xl-client", "root", "handle", "1:",
         "netem", "delay", "1000us", "loss", "0.1%"],
        ["tc", "-n", "ns2", "qdisc", "add", "dev", "xl-client", "parent", "1:1", "handle", "10:",
         "tbf", "rate", "100000000bit", "burst", "65536", "latency", "250000us"]]


def test_delay_without_rate_is_netem_alone():
    assert qdisc_argvs(parse_link("20ms"), "d", "n") == [
        ["tc", "-n", "n", "qdisc", "add", "dev", "d", "root", "handle", "1:", "netem", "delay", "20000us"]]
    assert qdisc_argvs(parse_link("2%"), "d", "n")[0][-3:] == ["netem", "loss", "2%"]


def test_loopback_has_no_command():
    assert qdisc_argvs(LOOPBACK, "d", "n") == []
    assert LOOPBACK.loopback and not parse_link("100mbit").loopback
    assert parse_link("1ms").needs_netem and not parse_link("100mbit").needs_netem


def test_qdisc_json_as_tc_prints_it():
    # tc -s -j qdisc show dev xl-server (iproute2 6.1), one tbf after a transfer
    data = [{"kind": "tbf", "handle": "1:", "root": True, "refcnt": 3,
             "options": {"rate": 12500000, "burst": 65525, "lat": 50000},
             "bytes": 37_843_292, "packets": 25_090, "drops": 0, "overlimits": 1201, "requeues": 0,
             "backlog": 0, "qlen": 0}]
    (q,) = parse_qdisc_json(data)
    assert q["kind"] == "tbf" and q["parent"] == "root" and q["bytes"] == 37_843_292
    assert q["overlimits"] == 1201 and q["options"]["rate"] == 12500000
    with pytest.raises(ValueError, match="list of objects"):
        parse_qdisc_json({"kind": "tbf"})


def test_queue_text_and_tc_arguments():
    from runner.net.conditions import LinkError, parse_link, qdisc_argvs

    link = parse_link("100mbit/queue=256kb/pfifo")
    assert (link.queue_bytes, link.queue_s, link.qdisc) == (262144, None, "pfifo")
    assert link.text() == "100mbit/queue=256kb/pfifo" and parse_link(link.text()) == link
    # the default written out is the default: same link, same text; the text names it
    assert parse_link({"rate": "100mbit", "queue": "250ms", "qdisc": "tbf"}) == parse_link("100mbit") \
        == LinkSpec(100_000_000)
    assert parse_link("100mbit/pfifo").text() == "100mbit/queue=250ms/pfifo"
    # the old default, 50 ms, is a queue like any other: named in the text, not the default
    old = parse_link("100mbit/queue=50ms")
    assert old != parse_link("100mbit") and old.text() == "100mbit/queue=50ms" and old.queue_limit_bytes() == 625_000
    tbf, child = qdisc_argvs(link, "d", "ns")  # pfifo of ceil(262144 / 1514) = 174 frames
    assert tbf[-2:] == ["limit", "262144"] and child[-5:] == ["handle", "20:", "pfifo", "limit", "174"]
    assert child[child.index("parent") + 1] == "1:1"
    q = parse_link("100mbit/5ms/queue=20ms/fq_codel")  # under netem, tbf is 10: and its child 10:1
    argvs = qdisc_argvs(q, "d", "ns")
    assert argvs[1][-2:] == ["latency", "20000us"] and argvs[2][argvs[2].index("parent") + 1] == "10:1"
    assert argvs[2][-2:] == ["memory_limit", "250000"]  # 20 ms at 12.5 MB/s
    for bad, word in (("100mbit/queue=1kb", "64kb"), ("100mbit/queue=2gb", "queue"), ("5ms/queue=1mb", "give a rate"),
                      ("100mbit/queue=1mb/queue=2mb", "two queue parts"), ("100mbit/red", "qdisc"),
                      ("100mbit/queue=500us", "1ms to 10s"), ("100mbit/queue=20s", "at most 10s")):
        with pytest.raises(LinkError, match=word):
            parse_link(bad)


def test_default_queue_is_250ms_at_the_rate():
    """The default queue is one bandwidth-delay product of a 250 ms round trip (the router
    rule of thumb, runner.net.conditions): 250 ms x rate / 8 bytes, never under one GSO packet."""
    from runner.net.conditions import DEFAULT_QUEUE_S, MIN_QUEUE_BYTES

    assert DEFAULT_QUEUE_S == 0.25
    assert parse_link("100mbit").queue_limit_bytes() == 3_125_000  # 100e6 / 8 x 0.25
    assert parse_link("1gbit").queue_limit_bytes() == 31_250_000
    assert parse_link("1mbit").queue_limit_bytes() == MIN_QUEUE_BYTES  # 31,250 B < 64 KiB
    assert parse_link("100mbit/pfifo").queue_limit_bytes() == 3_125_000
    assert qdisc_argvs(parse_link("100mbit/pfifo"), "d", "n")[1][-2:] == ["limit", "2065"]  # ceil(3125000 / 1514)
    assert LOOPBACK.queue_s is None and parse_link("1ms").queue_s is None  # no rate, no queue
