"""The launch form's ``mixed`` fields (operation weights, session length, think time, size
distribution, listing directory) and its capacity search: what the form queues is the spec
the CLI parses from the same values written as YAML (runner.spec.model.parse_spec, the one
validation), read back from the store; a bad weight or size bucket is refused beside its
field with the other inputs kept, and the API refuses the same spec naming the same path."""
from __future__ import annotations

import html
import re

import pytest
from sqlalchemy.orm import Session

from runner.spec.model import parse_spec
from tests.dashboard.test_api import login_form_token

#: The typed form: mixed sessions of RETR, STOR, LIST and NOOP over two size buckets, an
#: exponential think time, an open loop's user rate, and a capacity search at 64 KiB/s per user.
FORM = {"name": "mixed form", "repeats": "1", "backend": "local", "servers.0.name": "pyftpdlib",
        "servers.0.version": "2.2.0", "workloads": ["mixed"], "params.clients": "3", "params.duration": "4",
        "params.passive": "epsv", "params.user_rate": "32K",
        "params.mix.retr": "3", "params.mix.stor": "1", "params.mix.list": "1", "params.mix.noop": "0.5",
        "params.session_ops": "12", "params.session_seconds": "2.5", "params.think": "exponential",
        "params.think_ms": "20", "params.seed": "7", "params.dir_entries": "1000",
        "params.sizes.kind": "buckets", "params.sizes.buckets.0.size": "4K", "params.sizes.buckets.0.weight": "3",
        "params.sizes.buckets.2.size": "64KiB", "params.sizes.buckets.2.weight": "1",
        "params.sizes.size": "9M",  # a fixed kind's field, hidden for buckets: not sent
        "capacity.user_rate": "64K", "capacity.p99_ms": "500", "capacity.min_jain": "0.8", "capacity.start": "2",
        "capacity.max_users": "16", "capacity.resolution": "2", "capacity.confirm": "off",
        "link.loopback": "on", "link.0.rate": "100mbit", "link.0.queue": "256kb", "link.0.qdisc": "pfifo"}
#: The same campaign as a CLI spec (what ``xferlab run`` would read from YAML).
CLI_SPEC = {"name": "mixed form", "repeats": 1, "backend": "local", "warmup": False,
            "servers": [{"name": "pyftpdlib", "version": "2.2.0"}],
            "link": ["loopback", "100mbit/queue=256kb/pfifo"],
            "workloads": [{"name": "mixed", "params": {
                "clients": 3, "duration": 4, "passive": "epsv", "user_rate": "32K",
                "mix": {"retr": 3, "stor": 1, "list": 1, "noop": 0.5}, "session_ops": 12, "session_seconds": 2.5,
                "think": "exponential", "think_ms": 20, "seed": 7, "dir_entries": 1000,
                "sizes": {"kind": "buckets", "buckets": {"4K": 3, "64K": 1}}},
                "capacity": {"user_rate": "64K", "p99_ms": 500, "min_jain": 0.8, "start": 2, "max_users": 16,
                             "resolution": 2, "confirm": False}}]}


def _stored_specs(engine) -> list[dict]:
    from runner.store.models import Campaign

    with Session(engine) as s:
        return [c.spec for c in s.query(Campaign).order_by(Campaign.id)]


def _post(client, form: dict):
    return client.post("/launch", data={"csrf_token": login_form_token(client), **form}, follow_redirects=False)


def _error(page: str, field: str) -> str:
    marker = f'data-field="{field}">'
    assert marker in page, page[page.find("field-error") - 300:][:3000]
    return html.unescape(page.split(marker, 1)[1].split("</span>", 1)[0])


def _kept(page: str, form: dict) -> None:
    """Every field of ``form`` is on ``page`` as typed: a text input's value, a select's
    chosen option (when it offers the value), a checked box, a ticked workload."""
    for name, value in form.items():
        if name == "workloads":
            assert all(f'value="{w}" data-tags' in page and re.search(
                f'value="{w}" data-tags="[a-z ]*" checked', page) for w in value), value
        elif name == "link.loopback":
            assert 'name="link.loopback" checked' in page
        elif f'<select name="{name}"' in page:
            select = page.split(f'<select name="{name}"', 1)[1].split("</select>", 1)[0]
            options = re.findall(r'<option(?: value="([^"]*)")?[^>]*>([^<]*)</option>', select)
            if value not in [v or text for v, text in options]:
                continue  # a value the select does not offer (a hostile one) cannot be shown chosen
            chosen = re.findall(r'<option (?:value="([^"]*)" )?selected>([^<]*)</option>', select)
            assert [v or text for v, text in chosen] == [value], (name, chosen)
        elif value:
            assert f'name="{name}" value="{html.escape(value)}"' in page, name


def test_mixed_capacity_form_queues_the_cli_spec(client, engine):
    r = _post(client, FORM)
    assert r.status_code == 303, r.text[:3000]
    [stored] = _stored_specs(engine)
    assert stored == parse_spec(CLI_SPEC, "cli", from_dashboard=True).model_dump(mode="json")
    p = stored["workloads"][0]["params"]
    # against the typed literals: blank weights are 0, sizes in bytes, the hidden fixed size left out
    assert p["mix"] == {"retr": 3, "stor": 1, "list": 1, "mlsd": 0, "cwd": 0, "size": 0, "mdtm": 0, "dele": 0,
                        "resume": 0, "noop": 0.5}
    assert p["sizes"]["kind"] == "buckets" and p["sizes"]["buckets"] == {"4096": 3, "65536": 1}
    assert p["sizes"]["size"] == 1 << 20  # the default, not the hidden 9M
    assert (p["session_ops"], p["session_seconds"], p["think"], p["think_ms"], p["seed"], p["dir_entries"]) == (
        12, 2.5, "exponential", 20, 7, 1000)
    assert p["passive"] == "epsv" and p["user_rate"] == 32 * 1024
    cap = stored["workloads"][0]["capacity"]
    assert cap == {"user_rate": 65536, "check_rate": True, "p99_ms": 500, "min_jain": 0.8, "start": 2,
                   "max_users": 16, "resolution": 2, "confirm": False}
    assert stored["link"] == ["loopback", "100mbit/queue=256kb/pfifo"]


def test_mixed_fields_stay_out_of_other_workloads(client, engine):
    """The mixed fields (shown for ``mixed`` only) are not sent for another workload, even a bad one."""
    form = {**FORM, "workloads": ["retr_sustained"], "params.file_size": "64K", "params.mix.retr": "-1"}
    form = {k: v for k, v in form.items() if not k.startswith("capacity.")}
    r = _post(client, form)
    assert r.status_code == 303, r.text[:3000]
    [stored] = _stored_specs(engine)
    p = stored["workloads"][0]["params"]
    assert p["mix"] == parse_spec({"servers": [{"name": "tpd"}], "workloads": [{"name": "mixed"}]}).model_dump(
        mode="json")["workloads"][0]["params"]["mix"]
    assert p["think"] == "none" and p["session_ops"] == 20 and p["sizes"]["kind"] == "fixed"


@pytest.mark.parametrize(("fields", "error_field", "message"), [
    ({"params.mix.retr": "-1"}, "params.mix.retr", "greater than or equal to 0"),
    ({"params.mix.stor": "1e999"}, "params.mix.stor", "less than or equal to 1000000"),
    ({"params.mix.dele": "x; rm -rf /"}, "params.mix.dele", "valid number"),
    ({"params.mix.retr": "0", "params.mix.stor": "0", "params.mix.list": "0", "params.mix.noop": "0"},
     "params.mix", "every operation weight is 0"),
    ({"params.sizes.buckets.0.size": "4Q"}, "params.sizes.buckets", "not a size: '4Q'"),
    ({"params.sizes.buckets.0.weight": "-3"}, "params.sizes.buckets", "weight -3.0 of size 4096 outside"),
    ({"params.sizes.buckets.0.weight": "lots"}, "params.sizes.buckets", "bucket of 4096 bytes: Input should be"),
    ({"params.sizes.buckets.0.weight": "0", "params.sizes.buckets.2.weight": "0"}, "params.sizes.buckets",
     "every weight is 0"),
    ({"params.sizes.buckets.1.weight": "5"}, "params.sizes.buckets", "bucket 2: give its size"),
    ({"params.sizes.buckets.1.size": "4K", "params.sizes.buckets.1.weight": "1"}, "params.sizes.buckets",
     "bucket 2: size 4K is given twice"),
    ({"params.sizes.buckets.0.size": "32G"}, "params.sizes.buckets", "outside 1..17179869184"),
    ({"params.sizes.kind": "../etc"}, "params.sizes.kind", "'fixed', 'uniform', 'log2', 'buckets' or 'storm'"),
    ({"params.sizes.kind": "log2", "params.sizes.min": "1M", "params.sizes.max": "4K"}, "params.sizes",
     "min 1048576 is larger than max 4096"),
    ({"params.sizes.kind": "storm", "params.sizes.count": "0"}, "params.sizes.count", "greater than or equal to 1"),
    ({"params.think": "fixed", "params.think_ms": ""}, "params.think", "give think_ms > 0"),
    ({"params.think": "sometimes"}, "params.think", "'none', 'fixed' or 'exponential'"),
    ({"params.session_ops": "0"}, "params.session_ops", "greater than or equal to 1"),
    ({"params.dir_entries": "100001"}, "params.dir_entries", "less than or equal to 100000"),
    ({"capacity.confirm": "maybe"}, "capacity.confirm", "valid boolean"),
    ({"params.mix.retr": "0", "params.mix.stor": "0"}, "capacity", "moves no payload"),
])
def test_bad_mixed_values_are_refused_beside_their_field(client, engine, fields, error_field, message):
    r = _post(client, {**FORM, **fields})
    assert r.status_code == 422, r.text[:2000]
    assert message in _error(r.text, error_field)
    assert _stored_specs(engine) == []
    _kept(r.text, {**FORM, **fields})


@pytest.mark.parametrize(("params", "path", "message"), [
    ({"mix": {"retr": -1}}, "workloads.0.params.mix.retr", "greater than or equal to 0"),
    ({"mix": {"retr": 0, "noop": 0}}, "workloads.0.params.mix", "every operation weight is 0"),
    ({"sizes": {"kind": "buckets", "buckets": {"4Q": 1}}}, "workloads.0.params.sizes.buckets", "not a size: '4Q'"),
    ({"sizes": {"kind": "buckets", "buckets": {"4K": -3}}}, "workloads.0.params.sizes", "weight -3.0 of size 4096"),
])
def test_the_api_refuses_the_same(client, engine, auth, params, path, message):
    spec = {"name": "api", "servers": [{"name": "pyftpdlib", "version": "2.2.0"}], "backend": "local",
            "workloads": [{"name": "mixed", "params": params}]}
    r = client.post("/api/campaigns", json=spec, headers=auth)
    assert r.status_code == 422, r.text
    assert any(e["field"] == path and message in e["message"] for e in r.json()["errors"]), r.json()
    yaml_body = f"name: api\nbackend: local\nservers: [{{name: pyftpdlib, version: '2.2.0'}}]\n" \
                f"workloads: [{{name: mixed, params: {params!r}}}]\n".replace("'", '"').replace('"2.2.0"', "'2.2.0'")
    r = client.post("/api/campaigns", content=yaml_body, headers={**auth, "Content-Type": "application/yaml"})
    assert r.status_code == 422 and any(e["field"] == path for e in r.json()["errors"]), r.text
    assert _stored_specs(engine) == []


def test_fresh_form_shows_the_default_mix(client):
    from runner.catalogue.mixed import OPS, default_mix

    page = client.get("/launch").text
    weights = default_mix().weights()
    for op in OPS:
        value = f"{weights[op]:g}" if weights[op] else ""
        assert f'name="params.mix.{op}" value="{value}"' in page
    assert 'data-show-for="mixed"' in page and 'data-tags="openloop capacity mixed"' in page
    assert 'data-show-if="params.sizes.kind=buckets"' in page and "<script>" not in page
