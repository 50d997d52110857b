"""No secret of a campaign spec (runner.spec.redaction: an external server's password,
``hosts.inventory``) is readable from any read path: every GET route of the dashboard
(anonymous and with the token), every export, ``xferlab show`` / ``campaigns`` /
``export`` / ``compare``, and the worker's log and stored cells; while the worker still
runs with the real password. Real app, real PostgreSQL, a real FTP server on 127.0.0.1."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.report.render import FORMATS
from runner.spec.model import REDACTED, CampaignSpec, ServerSpec, parse_spec
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell, Sample
from tests.dashboard.conftest import SMALL, run_worker_once

PASSWORD = "S3cret-Password-1"
#: Only inside the inventory file (an Ansible become password).
BECOME = "Become-S3cret-2"
INVENTORY_NAME = "lab-hosts-7f3a.yml"
FAR = "far"
PY_LABEL = "pyftpdlib 2.2.0"


def _secrets(inventory: Path) -> list[str]:
    return [PASSWORD, BECOME, str(inventory), INVENTORY_NAME]


def _assert_clean(text: str, inventory: Path, where: str) -> None:
    for s in _secrets(inventory):
        assert s.lower() not in text.lower(), f"{where} shows the secret {s!r}"


@pytest.fixture
def inventory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An allowed inventory (XFERLAB_INVENTORY_DIRS) holding an SSH and a become password."""
    from runner.config import get_settings

    d = tmp_path / "inventories"
    d.mkdir()
    monkeypatch.setenv("XFERLAB_INVENTORY_DIRS", str(d))
    get_settings.cache_clear()
    p = d / INVENTORY_NAME
    p.write_text("servers:\n  hosts:\n    s1: {ansible_host: 127.0.0.1, ansible_password: " + BECOME
                 + ", ansible_become_password: " + BECOME + "}\n"
                 "clients:\n  hosts:\n    c1: {ansible_host: 127.0.0.1}\n")
    yield p
    get_settings.cache_clear()


@pytest.fixture
def secret_campaign(engine, inventory: Path) -> int:
    """A campaign across hosts (``hosts.inventory``) with an external server (password
    PASSWORD) whose cells failed with a reason echoing ``ftp://xferlab:PASSWORD@...``, and
    a pyftpdlib whose cells are done, their environment quoting the client's options with
    the password. Returns its id."""
    spec = parse_spec({"name": "secrets", "repeats": 1, "backend": "local",
                       "servers": [{"name": "external", "label": FAR,
                                    "external": {"host": "127.0.0.1", "port": 2121, "user": "xferlab",
                                                 "password": PASSWORD}},
                                   {"name": "pyftpdlib", "version": "2.2.0"}],
                       "hosts": {"inventory": str(inventory)},
                       "workloads": [{"name": "retr", "params": SMALL}, {"name": "login", "params": SMALL}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        camp.error = f"inventory {inventory}: group 'servers' has no host"
        s.commit()
        env = crud.get_or_create_environment(s, data={"kernel": "k", "driver": {
            "name": "lftp", "note": f"lftp options: open -u xferlab,{PASSWORD} ftp://xferlab:{PASSWORD}@127.0.0.1"}},
            env_class="envS")
        for c in s.scalars(select(Cell).where(Cell.campaign_id == camp.id).order_by(Cell.seq)):
            c.status, c.started_at = "running", crud.now()
            if c.server_label == FAR:
                crud.finish_cell(s, cell=c, status="failed", error=f"no FTP login at ftp://xferlab:{PASSWORD}"
                                 f"@127.0.0.1:2121/: 530 login incorrect for password {PASSWORD}")
            else:
                crud.finish_cell(s, cell=c, status="done", environment=env, samples=[
                    Sample(metric="elapsed", stat="value", value=1.5, unit="s"),
                    Sample(metric="throughput", stat="value", value=100.0, unit="MiB/s")])
        return camp.id


def _get_routes(app) -> list[str]:
    """Paths of every GET route of ``app``, included routers walked."""
    def walk(routes) -> Iterator[str]:
        for r in routes:
            if hasattr(r, "original_router"):
                yield from walk(r.original_router.routes)
            elif "GET" in (getattr(r, "methods", None) or ()):
                yield r.path
    return list(dict.fromkeys(walk(app.routes)))


def test_no_get_route_shows_a_secret(app, client, auth, secret_campaign, inventory, engine):
    cid = secret_campaign
    paths = _get_routes(app)
    assert "/api/campaigns/{campaign_id}" in paths and "/api/campaigns/{campaign_id}/export" in paths
    queries = [{"campaign": cid, "a": f"{cid}:{FAR}", "b": f"{cid}:{PY_LABEL}", "server": server,
                "workload": "retr", "format": fmt}
               for server in (FAR, PY_LABEL) for fmt in FORMATS]
    with Session(engine) as s:  # a cell of the campaign, for the cell pages (its profile: none)
        cell_id = s.scalars(select(Cell.id).where(Cell.campaign_id == cid).order_by(Cell.seq)).first()
    seen = 0
    for path in paths:
        # no bisect is stored: its pages answer 404, and must not fail or show a secret
        url = path.replace("{campaign_id}", str(cid)).replace("{cell_id}", str(cell_id)).replace("{job_id}", "1")
        assert "{" not in url, f"a path parameter this test does not fill: {path}"
        for headers in ({}, auth):
            for q in queries if "export" in path or "compare" in path or "memory" in path else queries[:1]:
                r = client.get(url, params=q, headers=headers)
                assert r.status_code < 500, (url, q, r.text[:500])
                _assert_clean(r.text, inventory, f"GET {url} {q} ({'token' if headers else 'anonymous'})")
                seen += r.status_code == 200
    assert seen > 2 * len(paths)
    for headers in ({}, auth):  # the spec is there, its secrets replaced
        spec = client.get(f"/api/campaigns/{cid}", headers=headers).json()["spec"]
        assert spec["servers"][0]["external"] == {"host": "127.0.0.1", "port": 2121, "user": "xferlab",
                                                  "password": REDACTED, "pid": None}
        assert spec["hosts"]["inventory"] == REDACTED and spec["servers"][1]["name"] == "pyftpdlib"
        detail = client.get(f"/api/campaigns/{cid}", headers=headers).json()
        assert f"ftp://xferlab:{REDACTED}@127.0.0.1:2121/" in detail["failures"][0]["error"]


def test_no_cli_read_shows_a_secret(engine, xferlab_env, secret_campaign, inventory, capsys):
    from runner.cli import main

    cid = secret_campaign
    runs = [["campaigns"], ["show", str(cid)], ["show", str(cid), "--timing"],
            *(["export", str(cid), "--format", f] for f in FORMATS),
            *(["compare", f"{cid}:{FAR}", f"{cid}:{PY_LABEL}", "--format", f] for f in FORMATS)]
    for argv in runs:
        rc = main(argv)
        out = capsys.readouterr()
        assert rc in (0, 2), (argv, out.err[-500:])
        _assert_clean(out.out + out.err, inventory, f"xferlab {' '.join(argv)}")
    main(["show", str(cid)])
    shown = capsys.readouterr().out
    assert f"ftp://xferlab:{REDACTED}@" in shown  # the failure is there, its password not


def test_the_worker_reads_the_real_secrets(engine, secret_campaign, inventory):
    """The store keeps the secrets where the worker reads them: the campaign's spec
    (runner.campaign.loop) and each cell's server spec (runner.cell.local)."""
    with Session(engine) as s:
        camp = s.get(Campaign, secret_campaign)
        assert camp is not None
        spec = CampaignSpec.model_validate(camp.spec)
        assert spec.servers[0].external is not None and spec.servers[0].external.password == PASSWORD
        assert spec.hosts is not None and spec.hosts.inventory == str(inventory)
        cell = s.scalars(select(Cell).where(Cell.campaign_id == camp.id, Cell.server_label == FAR)).first()
        assert cell is not None
        ext = ServerSpec.model_validate(cell.server_spec).external
        assert ext is not None and ext.password == PASSWORD


# -- the worker, on a real FTP server --------------------------------------------------------

ECHO_PASSWORD = "Echo-S3cret-9"


@pytest.fixture
def echo_ftp(tmp_path: Path) -> Iterator[int]:
    """A pyftpdlib server on 127.0.0.1 (a thread) accepting ``xferlab``/PASSWORD and
    answering any other login ``530`` with a reply that quotes the password it was given
    (as some servers log or echo it). Yields its port; stopped within 10 s."""
    from pyftpdlib.authorizers import AuthenticationFailed, DummyAuthorizer
    from pyftpdlib.handlers import FTPHandler
    from pyftpdlib.servers import FTPServer

    class Echoing(DummyAuthorizer):
        def validate_authentication(self, username, password, handler):
            if username != "xferlab" or password != PASSWORD:
                raise AuthenticationFailed(f"login incorrect for {username} with password {password}")

    home = tmp_path / "ftp"
    home.mkdir()
    auth = Echoing()
    auth.add_user("xferlab", PASSWORD, str(home), perm="elradfmwMT")
    handler: Callable = type("H", (FTPHandler,), {"authorizer": auth, "auth_failed_timeout": 0})
    server = FTPServer(("127.0.0.1", 0), handler)
    port = server.socket.getsockname()[1]
    th = threading.Thread(target=server.serve_forever, kwargs={"timeout": 0.2}, daemon=True)
    th.start()
    try:
        yield port
    finally:
        server.close_all()
        th.join(10)
        assert not th.is_alive()


@pytest.mark.integration
def test_worker_runs_with_the_password_and_never_shows_it(engine, xferlab_env, echo_ftp):
    """``xferlab worker --once`` logs in with the real password (the ``ok`` cells are done),
    while the refused login, whose reply quotes ECHO_PASSWORD, reaches neither its log nor
    the stored cells."""
    target = {"host": "127.0.0.1", "port": echo_ftp}
    spec = parse_spec({"name": "worker-secrets", "repeats": 1, "backend": "local", "warmup": False,
                       "servers": [{"name": "external", "label": "ok",
                                    "external": {**target, "user": "xferlab", "password": PASSWORD}},
                                   {"name": "external", "label": "refused",
                                    "external": {**target, "user": "intruder", "password": ECHO_PASSWORD}}],
                       "workloads": [{"name": "login", "params": {"clients": 2, "op_timeout": 20,
                                                                 "phase_timeout": 60}}]})
    cid, p = run_worker_once(engine, spec, xferlab_env)
    assert p.returncode == 0, p.stderr[-2000:]
    with Session(engine) as s:
        cells = {c.server_label: c for c in s.scalars(select(Cell).where(Cell.campaign_id == cid))}
        assert cells["ok"].status == "done", cells["ok"].error
        assert cells["refused"].status in ("skipped", "failed") and REDACTED in (cells["refused"].error or "")
        stored = " ".join(str((c.error, c.environment_id)) for c in cells.values())
    log = p.stdout + p.stderr
    assert f"password {REDACTED}" in log  # the refusal is logged, its password not
    for secret in (PASSWORD, ECHO_PASSWORD):
        assert secret.lower() not in log.lower(), f"the worker's log shows {secret!r}"
        assert secret.lower() not in stored.lower(), f"a stored cell shows {secret!r}"
