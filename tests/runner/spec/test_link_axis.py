"""The campaign's link axis (runner.spec.axes, runner.net.conditions): expansion into
server variants, labels, errors, and the CLI's --link."""
from __future__ import annotations

import pytest

from runner.spec.model import CampaignSpec, SpecError, expand, parse_spec


def _spec(**kw):
    d = {"servers": [{"name": "tpd"}, {"name": "vsftpd", "label": "vs"}],
         "workloads": [{"name": "retr_concurrent"}], "repeats": 1}
    d.update(kw)
    return d


def test_default_is_loopback_and_changes_nothing():
    spec = parse_spec(_spec())
    assert spec.link == ["loopback"]
    assert [s.display() for s in spec.servers] == ["tpd", "vs"]
    assert all("link" not in s.variant for s in spec.servers)


def test_axis_expands_each_server_once_per_link_with_a_label():
    spec = parse_spec(_spec(link=["loopback", "100mbit", {"rate": "1gbit", "delay": 0, "loss": 0}]))
    assert spec.link == ["loopback", "100mbit/queue=250ms", "1gbit/queue=250ms"]  # a rated link names its queue
    assert [s.display() for s in spec.servers] == [
        "tpd [link=loopback]", "tpd [link=100mbit/queue=250ms]", "tpd [link=1gbit/queue=250ms]", "vs [loopback]",
        "vs [100mbit/queue=250ms]", "vs [1gbit/queue=250ms]"]
    assert spec.servers[1].variant == {"link": "100mbit/queue=250ms"}
    assert len(expand(spec)) == 6


def test_expansion_is_idempotent_as_the_campaign_loop_reads_it_back():
    spec = parse_spec(_spec(link=["loopback", "100mbit"], storage=["disk", "tmpfs"]))
    again = CampaignSpec.model_validate(spec.model_dump(mode="json"))
    assert [s.display() for s in again.servers] == [s.display() for s in spec.servers]
    assert len(spec.servers) == 8


def test_mapping_and_text_are_canonical_and_deduplicated():
    spec = parse_spec(_spec(link=[{"rate": "100mbit", "delay": "1ms", "loss": "0.1%"}, "1ms/0.1%/100mbit"]))
    assert spec.link == ["100mbit/1ms/0.1%/queue=250ms"]
    assert [s.display() for s in spec.servers] == ["tpd [link=100mbit/1ms/0.1%/queue=250ms]",
                                                   "vs [100mbit/1ms/0.1%/queue=250ms]"]


def test_a_single_link_may_be_given_without_a_list():
    assert parse_spec(_spec(link="100mbit")).link == ["100mbit/queue=250ms"]


def test_with_storage_both_axes_multiply():
    spec = parse_spec(_spec(servers=[{"name": "tpd"}], storage=["disk", "tmpfs"], link=["loopback", "100mbit"]))
    assert [s.display() for s in spec.servers] == [
        "tpd [link=loopback,storage=disk]", "tpd [link=100mbit/queue=250ms,storage=disk]",
        "tpd [link=loopback,storage=tmpfs]", "tpd [link=100mbit/queue=250ms,storage=tmpfs]"]


def test_a_server_with_its_own_link_is_left_alone():
    spec = parse_spec(_spec(servers=[{"name": "tpd", "variant": {"link": "10mbit/queue=1mb"}}],
                            link=["loopback", "100mbit"]))
    assert [s.display() for s in spec.servers] == ["tpd [link=10mbit/queue=1mb]"]


@pytest.mark.parametrize("link, words", [
    (["100mbps"], "link: entry 0: rate '100mbps': tc's 'bps' units are bytes per second"),
    (["loopback", "fast"], "link: entry 1: link 'fast': part 'fast' is no rate"),
    ([{"rate": "100mbit", "jitter": "1ms"}], "unknown link key jitter"),
    ([], "link: List should have at least 1 item"),
])
def test_bad_links_are_refused_with_the_path(link, words):
    with pytest.raises(SpecError, match=words):
        parse_spec(_spec(link=link))


def test_variant_link_must_be_canonical():
    with pytest.raises(SpecError, match="write the link as '100mbit/queue=250ms'"):
        parse_spec(_spec(servers=[{"name": "tpd", "variant": {"link": "100000kbit"}}]))
    # the bare rate, which named a 50 ms queue in the cells stored before the default was
    # 250 ms, is refused in a variant (the variant is the server's history key): the queue
    # is written out
    with pytest.raises(SpecError, match="write the link as '100mbit/queue=250ms'"):
        parse_spec(_spec(servers=[{"name": "tpd", "variant": {"link": "100mbit"}}]))


def test_link_is_refused_across_hosts():
    with pytest.raises(SpecError, match="campaign across hosts"):
        parse_spec(_spec(link=["100mbit"], hosts={"server": "s1"}))


def test_cli_link_flag_repeatable_and_comma_list():
    from runner.cli import build_parser
    from runner.cli.campaign import _build_spec

    args = build_parser().parse_args(["run", "--preset", "classic", "--servers", "tpd", "--workloads", "retr",
                                      "--link", "loopback,100mbit", "--link", "100mbit/1ms"])
    spec = _build_spec(args)
    assert spec.link == ["loopback", "100mbit/queue=250ms", "100mbit/1ms/queue=250ms"]
    assert [s.display() for s in spec.servers] == ["tpd [link=loopback]", "tpd [link=100mbit/queue=250ms]",
                                                   "tpd [link=100mbit/1ms/queue=250ms]"]
