"""The launch form's TLS select: every FTP server once per mode, the form's value kept."""
from __future__ import annotations

from tests.dashboard.test_api import login_form_token


def test_launch_form_tls_axis(client, auth):
    form = {"csrf_token": login_form_token(client), "name": "ftps", "repeats": "1", "backend": "local",
            "servers.0.name": "pyftpdlib", "workloads": ["retr"], "params.clients": "10",
            "tls": "none,explicit"}
    r = client.post("/launch", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text[:2000]
    d = client.get(f"/api/campaigns/{r.headers['location'].rsplit('/', 1)[1]}").json()
    assert d["cells_total"] == 2 and d["spec"]["tls"] == ["none", "explicit"]
    assert [s["variant"] for s in d["spec"]["servers"]] == [{"tls": "none"}, {"tls": "explicit"}]
    page = client.get("/launch")
    assert page.status_code == 200 and 'name="tls"' in page.text and "explicit FTPS" in page.text
