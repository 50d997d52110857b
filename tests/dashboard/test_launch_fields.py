"""The launch form's sustained-load, sweep and link fields, and its list of presets: what the
form queues is the spec a worker runs; hostile values are refused by the spec model beside
their field, and nothing is stored."""
from __future__ import annotations

import html

import pytest

from runner.spec.presets import preset_facts, preset_names, preset_summary
from runner.spec.workloads import PRESETS
from tests.dashboard.test_api import login_form_token


def _form(client, **extra: str) -> dict:
    return {"csrf_token": login_form_token(client), "name": "sustained", "repeats": "1", "backend": "local",
            "servers.0.name": "pyftpdlib", "servers.0.version": "2.2.0", "workloads": ["retr_sustained"],
            "params.file_size": "256K", "params.duration": "0.5", **extra}


def _refused_beside(client, form: dict, error_field: str, message: str) -> None:
    """POST ``form`` to /launch: a 422 whose error beside ``error_field`` contains
    ``message``, and no campaign stored."""
    r = client.post("/launch", data=form, follow_redirects=False)
    assert r.status_code == 422, r.text[:2000]
    marker = f'data-field="{error_field}">'
    assert marker in r.text, r.text[r.text.find("field-error") - 200:][:2000]
    shown = html.unescape(r.text.split(marker, 1)[1].split("</span>", 1)[0])
    assert message in shown, shown
    assert client.get("/api/campaigns").json() == []


def _launched(client, form: dict) -> dict:
    """POST ``form`` to /launch (a redirect to the new campaign, 303) and return that
    campaign as the API gives it."""
    r = client.post("/launch", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text[:3000]
    return client.get(f"/api/campaigns/{r.headers['location'].rsplit('/', 1)[1]}").json()


def test_sustained_sweep_and_links_reach_the_spec(client):
    form = _form(client, **{"params.session": "reuse", "params.rate": "20", "params.user_rate": "64K",
                            "sweep": "4, 1 2", "link.loopback": "on", "link.0.rate": "100mbit",
                            "link.0.delay": "1ms", "link.1.delay": "5ms", "link.1.loss": "0.1%"})
    d = _launched(client, form)
    w = d["spec"]["workloads"][0]
    assert w["sweep"] == [1, 2, 4] and w["params"]["session"] == "reuse" and w["params"]["rate"] == 20
    assert w["params"]["user_rate"] == 64 * 1024
    assert d["spec"]["link"] == ["loopback", "100mbit/1ms/queue=250ms", "5ms/0.1%"]  # a rated link names its queue
    assert d["cells_total"] == 3 * 3  # 3 client counts x 3 links x 1 repeat


def test_no_shaped_link_is_loopback_alone(client):
    r = client.post("/launch", data=_form(client), follow_redirects=False)
    assert r.status_code == 303, r.text[:3000]
    d = client.get(f"/api/campaigns/{r.headers['location'].rsplit('/', 1)[1]}").json()
    assert d["spec"]["link"] == ["loopback"] and d["spec"]["workloads"][0].get("sweep") is None
    assert d["cells_total"] == 1


@pytest.mark.parametrize(("field", "value", "error_field", "message"), [
    ("sweep", "1, 2; rm -rf /", "sweep", "client count 2: Input should be a valid integer"),
    ("sweep", "0, 99999", "sweep", "outside 1..20000"),
    ("sweep", ",".join(str(n) for n in range(1, 70)), "sweep", "at most 64"),
    ("params.session", "per_op; reboot", "params.session", "'per_op' or 'reuse'"),
    ("params.rate", "-5", "params.rate", "greater than 0"),
    ("params.rate", "1e999", "params.rate", "less than or equal to 1000000"),
    ("params.user_rate", "64K$(id)", "params.user_rate", "size"),
    ("link.0.rate", "100mbit`id`", "link", "want a number and bit"),
    ("link.0.rate", "100mbps", "link", "bytes per second"),
    ("link.0.delay", "../../etc/passwd", "link", "delay"),
    ("link.0.loss", "100%", "link", "loss"),
])
def test_hostile_values_are_refused_beside_their_field(client, field, value, error_field, message):
    _refused_beside(client, _form(client, **{field: value}), error_field, message)


def test_every_preset_is_listed(client):
    page = html.unescape(client.get("/launch").text)
    assert preset_names() == ["classic", "realistic", "seed002", "seed003", "seed004", "seed004_queues"]
    for name in preset_names():
        assert f"<option>{name}</option>" in page and f"<b>{name}</b>: {preset_summary(name)}" in page
        assert preset_facts(name) in page
    assert preset_summary("seed002") == "Seed 002's HTTP upload lab"
    assert preset_facts("seed004") == "5 servers; retr_concurrent; repeats 3; link loopback, 100mbit"
    for name, workloads in PRESETS.items():
        assert f"preset <b>{name}</b> <span class=\"small muted\">({', '.join(workloads)})</span>" in page
    with pytest.raises(LookupError):
        preset_summary("seed999")


def test_capacity_and_link_queue_reach_the_spec(client):
    form = _form(client, **{"params.file_size": "64K", "params.duration": "2", "capacity.user_rate": "128K",
                            "capacity.p99_ms": "500", "capacity.min_jain": "0.8", "capacity.max_users": "64",
                            "link.0.rate": "100mbit", "link.0.queue": "256kb", "link.0.qdisc": "pfifo"})
    d = _launched(client, form)
    cap = d["spec"]["workloads"][0]["capacity"]
    assert (cap["user_rate"], cap["p99_ms"], cap["min_jain"], cap["max_users"]) == (128 * 1024, 500, 0.8, 64)
    assert d["spec"]["link"] == ["100mbit/queue=256kb/pfifo"]
    assert d["cells_total"] == 1  # the search's first step; the campaign queues the next ones


@pytest.mark.parametrize(("field", "value", "error_field", "message"), [
    ("capacity.user_rate", "128K;id", "capacity.user_rate", "size"),
    ("capacity.p99_ms", "-1", "capacity.p99_ms", "greater than 0"),
    ("capacity.min_jain", "1.5", "capacity.min_jain", "less than or equal to 1"),
    ("capacity.max_users", "99999", "capacity.max_users", "less than or equal to 20000"),
    ("capacity.start", "9", "capacity", "capacity.start (9) is above capacity.max_users (8)"),
    ("params.file_size", "1M", "capacity", "operations per step"),
    ("link.0.queue", "1kb", "link", "want 64kb"),
    ("link.0.queue", "$(reboot)", "link", "queue"),
    ("link.0.qdisc", "netem", "link", "want one of tbf, pfifo, fq_codel"),
])
def test_hostile_capacity_and_queue_values(client, field, value, error_field, message):
    extra = {"params.file_size": "64K", "params.duration": "2", "capacity.user_rate": "128K",
             "capacity.max_users": "8", "link.0.rate": "100mbit", field: value}
    _refused_beside(client, _form(client, **extra), error_field, message)
