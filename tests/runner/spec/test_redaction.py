"""runner.spec.redaction: the secret fields come from the models' marker, the redacted spec
hides exactly them, text is scrubbed of them; an inventory Ansible cannot parse does not
put its lines (passwords included) into the error."""
from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

from runner.spec.model import REDACTED, CampaignSpec, ServerSpec, redacted, secret_values
from runner.spec.redaction import SECRET_FIELD, ScrubFilter, redact_model_data, scrub, scrub_data, secret_paths
from tests.runner.spec.test_inventory_policy import needs_ansible

PASSWORD = "S3cret-Password-1"
SPEC = {"name": "x", "servers": [{"name": "external", "external": {"host": "h", "port": 21, "user": "u",
                                                                  "password": PASSWORD}},
                                 {"name": "tpd", "variant": {}}],
        "hosts": {"inventory": "/inv/lab.yml", "server": "s1"}, "workloads": [{"name": "retr"}]}


def test_secret_paths_follow_the_marker():
    assert secret_paths(CampaignSpec) == (("servers", "*", "external", "password"), ("hosts", "inventory"))
    assert secret_paths(ServerSpec) == (("external", "password"),)
    schema = ServerSpec.model_json_schema()["$defs"]["ExternalTarget"]["properties"]["password"]
    assert schema["secret"] is True and schema["writeOnly"] is True

    class Inner(BaseModel):
        key: str = Field(json_schema_extra=SECRET_FIELD)
        plain: str = ""

    class Outer(BaseModel):
        one: Inner | None = None
        many: dict[str, Inner] = {}

    assert secret_paths(Outer) == (("one", "key"), ("many", "*", "key"))
    assert redact_model_data({"one": {"key": "k", "plain": "p"}, "many": {"a": {"key": "z"}}}, Outer) == {
        "one": {"key": REDACTED, "plain": "p"}, "many": {"a": {"key": REDACTED}}}


def test_redacted_hides_exactly_the_secrets_and_leaves_the_input():
    out = redacted(SPEC)
    assert out["servers"][0]["external"] == {"host": "h", "port": 21, "user": "u", "password": REDACTED}
    assert out["hosts"] == {"inventory": REDACTED, "server": "s1"}
    assert out["servers"][1] == SPEC["servers"][1] and out["workloads"] == SPEC["workloads"]
    assert SPEC["servers"][0]["external"]["password"] == PASSWORD  # not modified
    assert redacted(None) == {} and redacted({"hosts": {"inventory": None}}) == {"hosts": {"inventory": None}}
    assert redacted(SPEC["servers"][0], ServerSpec)["external"]["password"] == REDACTED
    assert secret_values(SPEC) == {PASSWORD, "/inv/lab.yml"}


def test_scrub():
    secrets = secret_values(SPEC)
    assert scrub(f"530 for {PASSWORD.upper()} at ftp://u:{PASSWORD}@h:21/x", secrets) == \
        f"530 for {REDACTED} at ftp://u:{REDACTED}@h:21/x"
    assert scrub("sftp://a:other-pass@h/ and postgresql://u:p%40ss@db:5432/x") == \
        f"sftp://a:{REDACTED}@h/ and postgresql://u:{REDACTED}@db:5432/x"
    assert scrub("P@ss w0rd!", {"P@ss w0rd!"}) == REDACTED
    assert scrub("user P%40ss%20w0rd%21", {"P@ss w0rd!"}) == f"user {REDACTED}"
    assert scrub("ftp ftp", {"ftp"}) == "ftp ftp"  # too short to search for
    assert scrub(None, secrets) is None and scrub("http://h:8080/a@b", secrets) == "http://h:8080/a@b"
    assert scrub_data({"k": [PASSWORD, ("x", 1)], PASSWORD: 2.0}, secrets) == {"k": [REDACTED, ("x", 1)],
                                                                                REDACTED: 2.0}


def test_log_filter():
    """A handler of its own on a logger of its own: the process's LOG_FILTER, which an
    in-process campaign of another test may have put on the root logger's handlers with
    other secrets, does not see these records first."""
    import io
    import logging

    f = ScrubFilter()
    f.add({PASSWORD})
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(f)
    log = logging.getLogger("xferlab.test.log_filter")
    log.propagate = False
    log.addHandler(handler)
    try:
        log.warning("login %s failed at %s", PASSWORD, "ftp://u:pw@h/")
    finally:
        log.removeHandler(handler)
    text = out.getvalue()
    assert PASSWORD not in text and f"login {REDACTED} failed at ftp://u:{REDACTED}@h/" in text, text


@needs_ansible
def test_unparsable_inventory_does_not_quote_its_secrets(tmp_path, monkeypatch):
    from runner.multihost import MultiHostError
    from runner.multihost.inventory import load_inventory

    monkeypatch.setenv("XFERLAB_INVENTORY_DIRS", str(tmp_path))
    bad = tmp_path / "lab.ini"  # Ansible's ini plugin quotes the token it cannot read
    bad.write_text(f"[servers]\ns1 ansible_become_password=x {PASSWORD}\n[clients]\nc1\n")
    with pytest.raises(MultiHostError, match="ansible-inventory .* failed") as ei:
        load_inventory(bad)
    assert PASSWORD not in str(ei.value) and str(bad) in str(ei.value)
