"""The launch form's link fields (the spec's link axis, runner.spec.axes): the loopback box
and the shaped-link rows (rate, delay, loss)."""
from __future__ import annotations

from tests.dashboard.test_api import login_form_token


def test_launch_form_link_axis(client, auth):
    csrf = login_form_token(client)
    form = {"csrf_token": csrf, "name": "l", "repeats": "1", "backend": "local", "servers.0.name": "tpd",
            "workloads": ["retr"], "link.loopback": "on", "link.0.rate": "100mbit"}
    r = client.post("/launch", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text[:2000]
    d = client.get(f"/api/campaigns/{r.headers['location'].rsplit('/', 1)[1]}").json()
    assert d["cells_total"] == 2 and d["spec"]["link"] == ["loopback", "100mbit/queue=250ms"]
    assert [s.get("variant") for s in d["spec"]["servers"]] == [{"link": "loopback"}, {"link": "100mbit/queue=250ms"}]
    # a rate in bytes per second is refused beside the link fields, the values kept
    form["link.0.rate"] = "100mbps"
    r = client.post("/launch", data=form, follow_redirects=False)
    assert r.status_code == 422 and "bytes per second" in r.text and 'data-field="link"' in r.text
    assert 'value="100mbps"' in r.text
    page = client.get("/launch").text
    assert 'name="link.0.rate"' in page and 'name="link.loopback" checked' in page
