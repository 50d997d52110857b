"""API and page tests: FastAPI TestClient against the real test PostgreSQL."""
from __future__ import annotations

import re

import yaml

from tests.dashboard.conftest import SMALL, TOKEN

PY = {"name": "pyftpdlib", "version": "2.2.0"}
PY_NOSF = {"name": "pyftpdlib", "version": "2.2.0", "variant": {"use_sendfile": False}}


def login_form_token(client) -> str:
    """Log ``client`` in with the cookie and return the CSRF token of the real launch form."""
    client.cookies.set("xferlab_token", TOKEN)
    html = client.get("/launch").text
    tokens = set(re.findall(r'name="csrf_token" value="([0-9a-f]*)"', html))
    assert len(tokens) == 1 and all(tokens), tokens
    return tokens.pop()


def _two_server(store_campaign):
    return store_campaign([PY, PY_NOSF], {(0, "retr"): [1000, 1010, 990, 1005], (1, "retr"): [600, 610, 590, 605],
                                          (0, "login"): [0.10, 0.11, 0.10, 0.12],
                                          (1, "login"): [0.10, 0.11, 0.12, 0.10]})


def test_pages_render(client, store_campaign):
    cid = _two_server(store_campaign)
    for url in ("/", f"/campaigns/{cid}", "/launch", "/history", "/regressions", "/login", "/docs",
                f"/compare?campaign={cid}&a=pyftpdlib 2.2.0&b=pyftpdlib 2.2.0 [use_sendfile=False]"):
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:500])
    page = client.get(f"/campaigns/{cid}").text
    assert "RETR (server -&gt; client)" in page
    # the report context, as in the exports: where it was measured (the stored snapshot)
    assert '<h3>Conducted on</h3>' in page and 'id="context-table"' in page


def test_campaign_api_progress(client, store_campaign):
    cid = _two_server(store_campaign)
    r = client.get(f"/api/campaigns/{cid}")
    assert r.status_code == 200
    d = r.json()
    assert d["status"] == "done" and d["cells_done"] == d["cells_total"] == 16
    assert d["running"] == [] and d["failures"] == []
    assert d["latest"] and d["latest"][0]["figure"]
    assert [c["id"] for c in client.get("/api/campaigns").json()] == [cid]


def test_launch_needs_token(app, client, auth):
    spec = {"name": "x", "repeats": 1, "servers": [PY], "workloads": [{"name": "retr", "params": SMALL}]}
    r = client.post("/api/campaigns", json=spec)
    assert r.status_code == 401 and "token" in r.json()["detail"]
    r = client.post("/api/campaigns", json=spec, headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401
    r = client.post("/api/campaigns", json=spec, headers=auth)
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    d = client.get(f"/api/campaigns/{cid}").json()
    assert d["status"] == "queued" and d["cells_queued"] == 1
    # YAML body
    r = client.post("/api/campaigns", content=yaml.safe_dump(spec),
                    headers={**auth, "Content-Type": "application/yaml"})
    assert r.status_code == 201
    # cancel
    assert client.post(f"/api/campaigns/{cid}/cancel").status_code == 401
    r = client.post(f"/api/campaigns/{cid}/cancel", headers=auth)
    assert r.status_code == 200 and r.json()["status"] == "cancelled" and r.json()["cells_cancelled"] == 1
    assert client.post(f"/api/campaigns/{cid}/cancel", headers=auth).status_code == 409
    assert client.post("/api/campaigns/9999/cancel", headers=auth).status_code == 404
    # no token configured: mutations disabled
    app.state.settings.api_token = None
    r = client.post("/api/campaigns", json=spec, headers=auth)
    assert r.status_code == 403 and "XFERLAB_API_TOKEN" in r.json()["detail"]


def test_launch_bad_spec_is_422_with_fields(client, auth):
    bad = {"servers": [{"name": "nope"}], "workloads": [{"name": "retr", "params": {"clients": -1}}], "repeats": 0}
    r = client.post("/api/campaigns", json=bad, headers=auth)
    assert r.status_code == 422
    fields = {e["field"] for e in r.json()["errors"]}
    assert "repeats" in fields and "workloads.0.params.clients" in fields and "servers.0.name" in fields
    jauth = {**auth, "Content-Type": "application/json"}
    assert client.post("/api/campaigns", content=b"{not json", headers=jauth).status_code == 422
    assert client.post("/api/campaigns", content=b"[1, 2]", headers=jauth).status_code == 422
    r = client.post("/api/campaigns", content=b"a: [", headers={**auth, "Content-Type": "text/yaml"})
    assert r.status_code == 422 and "YAML" in r.json()["detail"]


def test_launch_form_errors_beside_fields(client, auth):
    csrf = login_form_token(client)
    form = {"csrf_token": csrf, "name": "f", "repeats": "0", "backend": "local", "servers.0.name": "pyftpdlib",
            "servers.0.version": "2.2.0", "servers.1.name": "pyftpdlib", "servers.1.variant": "oops",
            "workloads": ["retr"], "params.clients": "-5", "params.file_size": "ten"}
    r = client.post("/launch", data=form, follow_redirects=False)
    assert r.status_code == 422
    html = r.text
    assert 'data-field="repeats"' in html and 'data-field="params.clients"' in html
    assert 'data-field="params.file_size"' in html and 'data-field="servers.1.variant"' in html
    form.update({"repeats": "2", "servers.1.variant": "use_sendfile=false", "params.clients": "10",
                 "params.file_size": "256K"})
    r = client.post("/launch", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text[:2000]
    cid = int(r.headers["location"].rsplit("/", 1)[1])
    d = client.get(f"/api/campaigns/{cid}").json()
    assert d["cells_total"] == 4 and d["spec"]["servers"][1]["variant"] == {"use_sendfile": False}
    assert d["spec"]["workloads"][0]["params"]["file_size"] == 256 * 1024
    # the storage select: both kinds run every server once on disk and once on tmpfs
    form.update({"storage": "disk,tmpfs", "servers.1.variant": "use_sendfile=false, backlog=512"})
    r = client.post("/launch", data=form, follow_redirects=False)
    assert r.status_code == 303, r.text[:2000]
    d = client.get(f"/api/campaigns/{r.headers['location'].rsplit('/', 1)[1]}").json()
    assert d["cells_total"] == 8
    assert [s.get("variant") for s in d["spec"]["servers"]] == [
        {"storage": "disk"}, {"storage": "tmpfs"}, {"use_sendfile": False, "backlog": 512, "storage": "disk"},
        {"use_sendfile": False, "backlog": 512, "storage": "tmpfs"}]
    # a variant key the server does not honour is shown beside the variant field
    form.update({"storage": "disk", "servers.1.variant": "idle_timeout=5"})
    r = client.post("/launch", data=form, follow_redirects=False)
    assert r.status_code == 422 and "idle_timeout: pyftpdlib does not honour it" in r.text
    assert 'data-field="servers.1.variant"' in r.text


def test_launch_yaml_upload(client):
    csrf = login_form_token(client)
    spec = {"name": "up", "repeats": 1, "servers": [PY], "workloads": [{"name": "login", "params": SMALL}]}
    r = client.post("/launch/yaml", files={"file": ("s.yaml", yaml.safe_dump(spec).encode())},
                    data={"csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 303
    r = client.post("/launch/yaml", files={"file": ("s.yaml", b"servers: 3\n")}, data={"csrf_token": csrf},
                    follow_redirects=False)
    assert r.status_code == 422 and "servers" in r.text
    r = client.post("/launch/yaml", data={"csrf_token": csrf}, follow_redirects=False)
    assert r.status_code == 422 and "no file" in r.text


def test_launch_preset(client):
    csrf = login_form_token(client)
    page = client.get("/launch").text
    assert 'action="/launch/preset"' in page and "<option>seed002</option>" in page
    r = client.post("/launch/preset", data={"csrf_token": csrf, "preset": "seed002", "repeats": "1",
                                            "backend": "local"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/campaigns/")
    r = client.post("/launch/preset", data={"csrf_token": csrf, "preset": "nope"}, follow_redirects=False)
    assert r.status_code == 422 and "unknown preset" in r.text and "seed002" in r.text
    r = client.post("/launch/preset", data={"csrf_token": csrf, "preset": "seed002", "repeats": "zero"},
                    follow_redirects=False)
    assert r.status_code == 422 and "repeats" in r.text


def test_login_cookie(client):
    r = client.post("/login", data={"token": "bad", "next": "/"}, follow_redirects=False)
    assert r.status_code == 401
    r = client.post("/login", data={"token": "test-token-123", "next": "/launch"}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/launch" and "xferlab_token" in r.cookies


def test_compare_api_and_export_bytes(client, engine, store_campaign):
    from sqlalchemy.orm import Session

    from runner.report.reader import load_campaign
    from runner.report.render import campaign_report, compare_report

    cid = _two_server(store_campaign)
    a, b = "pyftpdlib 2.2.0", "pyftpdlib 2.2.0 [use_sendfile=False]"
    r = client.get("/api/compare", params={"a": a, "b": b, "campaign": cid})
    assert r.status_code == 200, r.text
    d = r.json()
    retr = next(row for row in d["comparison"]["records"] if row["workload"] == "retr")
    assert retr["significant"] is True and retr["p_value"] < 0.05
    assert d["memory"]["rows"][0][0] == "Starting with"
    cost = d["cost"]  # the fixture stores server CPU per unit of work, as real cells do
    assert cost["title"].startswith("Server CPU per unit of work")
    assert [r[1].split()[1] for r in cost["rows"][:2]] == ["s/GiB", "us/op"], cost["rows"]  # RETR, login
    bare = store_campaign([PY, PY_NOSF], {(0, "retr"): [1000] * 4, (1, "retr"): [600] * 4, (0, "login"): [0.1] * 4,
                                          (1, "login"): [0.1] * 4}, cpu_cost=False)
    assert client.get("/api/compare", params={"a": a, "b": b, "campaign": bare}).json()["cost"] is None
    with Session(engine) as s:
        for fmt in ("rst", "html", "md", "csv", "json"):
            want = compare_report(s, a, b, campaign=cid, fmt=fmt)
            r = client.get("/api/compare/export", params={"a": a, "b": b, "campaign": cid, "format": fmt})
            assert r.status_code == 200 and r.content == want.encode(), fmt
            want = campaign_report(load_campaign(s, campaign_id=cid), fmt=fmt)
            r = client.get(f"/api/campaigns/{cid}/export", params={"format": fmt})
            assert r.content == want.encode() and "attachment" in r.headers["content-disposition"]
    t = client.get("/api/memory-timeline", params={"campaign": cid, "server": a}).json()
    assert t["timelines"] and len(t["timelines"][0]["points"][0]) == 4


def test_two_campaign_compare_warns_on_env(client, store_campaign):
    c1 = store_campaign([PY], {(0, "retr"): [1000] * 4, (0, "login"): [0.1] * 4}, env_class="envA")
    c2 = store_campaign([PY], {(0, "retr"): [900] * 4, (0, "login"): [0.1] * 4}, env_class="envB")
    d = client.get("/api/compare", params={"a": str(c1), "b": str(c2)}).json()
    assert d["warnings"] and "environments differ" in d["warnings"][0]
    assert d["a"].endswith(f"(#{c1})")


def test_bad_input_is_4xx_never_500(client, store_campaign):
    cid = _two_server(store_campaign)
    cases = [
        ("/api/campaigns/999", 404), ("/api/campaigns/abc", 422), ("/campaigns/999", 404),
        ("/api/campaigns?limit=0", 422), ("/api/compare?a=1&b=2", 404),
        (f"/api/compare?a={cid}:nope&b={cid}:pyftpdlib 2.2.0", 404), ("/api/compare?a=x", 422),
        (f"/api/campaigns/{cid}/export?format=pdf", 422), ("/api/campaigns/999/export?format=rst", 404),
        ("/api/history?server=x&workload=retr", 404), ("/api/regressions?alpha=2", 422),
        ("/api/regressions?min_effect=-1", 422), ("/history/series?server=x&workload=y", 404),
        ("/compare?a=1&b=2", 404), ("/api/memory-timeline?campaign=999&server=x", 404),
        (f"/api/compare?a={cid}:pyftpdlib 2.2.0&b={cid}:pyftpdlib 2.2.0", 404),
    ]
    for url, status in cases:
        r = client.get(url)
        assert r.status_code == status, (url, r.status_code, r.text[:300])
        if url.startswith("/api/"):
            assert r.json()["detail"]


def test_chartjs_served_and_openapi(client):
    r = client.get("/static/vendor/chart.min.js")
    assert r.status_code == 200 and b"Chart.js v3.9.1" in r.content[:300]
    paths = client.get("/openapi.json").json()["paths"]
    for p in ("/api/campaigns", "/api/campaigns/{campaign_id}", "/api/compare", "/api/history",
              "/api/regressions", "/api/compare/export", "/api/campaigns/{campaign_id}/export"):
        assert p in paths


def test_private_mode_needs_token_for_reads(app, client, auth):
    app.state.settings.private = True
    assert client.get("/api/campaigns").status_code == 401
    assert client.get("/api/campaigns", headers=auth).status_code == 200
    r = client.get("/", follow_redirects=False, headers={"Accept": "text/html"})
    assert r.status_code == 303 and r.headers["location"].startswith("/login")


def test_fuzz_findings_are_4xx(client, store_campaign):
    """Inputs schemathesis found answered 500: ids past PostgreSQL's integer, offsets past
    bigint, NUL bytes in text compared in SQL. Each is a 422 with a JSON detail now."""
    cid = _two_server(store_campaign)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    cases = [("GET", "/api/campaigns/2147483648"), ("POST", "/api/campaigns/2147483648/cancel"),
             ("GET", "/api/campaigns?limit=1&offset=9223372036854775808"),
             ("GET", "/api/campaigns/2147483648/export?format=csv"),
             ("GET", "/api/memory-timeline?campaign=2147483648&server=x"),
             ("GET", "/api/compare?a=%00&b=x"), ("GET", f"/api/memory-timeline?campaign={cid}&server=%00"),
             ("GET", "/api/history?server=%00&workload=retr")]
    for method, url in cases:
        r = client.request(method, url, headers=auth)
        assert r.status_code == 422, (url, r.status_code, r.text[:300])
        assert r.json()["detail"], url
