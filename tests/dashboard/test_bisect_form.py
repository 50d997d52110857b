"""The bisect form (``/bisect``): what it queues is the request ``xferlab bisect`` would run
(validated by the same spec model); hostile ``source``/ref values and bad parameters are
refused beside the field they belong to, with the model's reason, and nothing is stored."""
from __future__ import annotations

import html
import subprocess

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from runner.store.models import BisectJob
from tests.dashboard.test_api import login_form_token


@pytest.fixture
def checkout(tmp_path):
    """A git repository with one commit (a real source directory)."""
    repo = tmp_path / "src"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=env)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "a"], cwd=repo, check=True, env=env)
    return repo


def _form(client, checkout, **extra: str) -> dict:
    return {"csrf_token": login_form_token(client), "server": "pyftpdlib", "source": str(checkout),
            "good": "v1.0", "bad": "main", "workload": "retr_concurrent", "metric": "elapsed",
            "params.clients": "4", "params.file_size": "64K", "repeats": "4", "max_rounds": "2",
            "min_effect": "20%", "backend": "local", **extra}


def _count(engine) -> int:
    with Session(engine) as s:
        return s.scalar(select(func.count()).select_from(BisectJob)) or 0


def test_the_form_queues_the_request(client, engine, checkout):
    page = client.get("/bisect")
    assert page.status_code == 200 and 'id="bisect-form"' in page.text and "No bisect yet." in page.text
    r = client.post("/bisect", data=_form(client, checkout), follow_redirects=False)
    assert r.status_code == 303, r.text[:3000]
    job_id = int(r.headers["location"].rsplit("/", 1)[1])
    with Session(engine) as s:
        job = s.get(BisectJob, job_id)
        assert job is not None and job.status == "queued" and job.steps == [] and job.owner is None
        assert job.request == {"server": "pyftpdlib", "source": str(checkout.resolve()), "good": "v1.0",
                               "bad": "main", "workload": "retr_concurrent",
                               "params": {"clients": "4", "file_size": "64K"}, "metric": "elapsed",
                               "repeats": 4, "max_rounds": 2, "min_effect": 0.2, "backend": "local",
                               "warmup": False}
    shown = client.get(f"/bisect/{job_id}").text
    assert "Waiting for a worker" in shown and 'http-equiv="refresh"' in shown
    assert f'<a href="/bisect/{job_id}">{job_id}</a>' in client.get("/bisect").text


def test_the_form_needs_the_token(client, engine, checkout):
    form = _form(client, checkout)
    client.cookies.clear()
    assert client.post("/bisect", data=form, follow_redirects=False).status_code == 401
    client.cookies.set("xferlab_token", "test-token-123")
    form["csrf_token"] = "0" * 64
    assert client.post("/bisect", data=form, follow_redirects=False).status_code == 403
    assert _count(engine) == 0


@pytest.mark.parametrize(("field", "value", "error_field", "message"), [
    ("source", "-oProxyCommand=id", "source", "cannot start with '-'"),
    ("source", "ext::sh -c id", "source", ""),
    ("source", "https://evil.example/x`id`", "source", "characters a git URL does not need"),
    ("source", "gopher://h/x", "source", "scheme 'gopher' is not allowed"),
    ("source", "/nonexistent/dir", "source", ""),
    ("good", "--upload-pack=touch /tmp/x", "good", "not a git ref xferlab accepts"),
    ("good", "main;rm -rf /", "good", "not a git ref xferlab accepts"),
    ("bad", "a..b", "bad", "not a git ref xferlab accepts"),
    ("bad", "$(id)", "bad", "not a git ref xferlab accepts"),
    ("server", "nginx", "server", "nginx cannot be built from source here"),
    ("workload", "retr; id", "workload", ""),
    ("params.clients", "4; id", "params.clients", "integer"),
    ("params.file_size", "64K$(id)", "params.file_size", "size"),
    ("metric", "elapsed'; drop table campaign", "metric", "not a metric name"),
    ("repeats", "2", "repeats", "greater than or equal to 3"),
    ("repeats", "5 && id", "repeats", "integer"),
    ("min_effect", "lots", "min_effect", "number"),
    ("backend", "ssh", "backend", "'auto', 'local' or 'docker'"),
])
def test_hostile_values_are_refused_beside_their_field(client, engine, checkout, field, value, error_field,
                                                       message):
    r = client.post("/bisect", data=_form(client, checkout, **{field: value}), follow_redirects=False)
    assert r.status_code == 422, r.text[:2000]
    marker = f'data-field="{error_field}">'
    assert marker in r.text, r.text[r.text.find("field-error") - 200:][:2000]
    shown = html.unescape(r.text.split(marker, 1)[1].split("</span>", 1)[0])
    assert shown and message in shown, shown
    assert f'value="{value}"' in html.unescape(r.text) or field in ("server", "workload", "backend")  # kept
    assert _count(engine) == 0


@pytest.mark.integration
def test_the_worker_fails_a_bisect_whose_ref_does_not_resolve_and_reaps_a_dead_one(client, engine, checkout,
                                                                                     xferlab_env):
    import socket
    import sys

    r = client.post("/bisect", data=_form(client, checkout, good="no-such-tag"), follow_redirects=False)
    assert r.status_code == 303, r.text[:2000]
    job_id = int(r.headers["location"].rsplit("/", 1)[1])
    with Session(engine) as s:
        dead = BisectJob(request={"server": "pyftpdlib"}, status="running", steps=[], log=[],
                         owner=f"{socket.gethostname()}:999999999")
        s.add(dead)
        s.commit()
        dead_id = dead.id
    p = subprocess.run([sys.executable, "-m", "runner.cli", "worker", "--once", "--poll", "0.2"], env=xferlab_env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert f"bisect {job_id} claimed" in p.stderr and f"bisect {job_id} failed" in p.stderr
    with Session(engine) as s:
        job, gone = s.get(BisectJob, job_id), s.get(BisectJob, dead_id)
        assert job.status == "failed" and "no-such-tag" in job.error and job.finished_at is not None, job.error
        assert job.steps == [] and job.log[-1].endswith(job.error) and "bisect stopped" in job.log[-1]
        assert gone.status == "failed" and "stopped" in gone.error
    page = client.get(f"/bisect/{job_id}").text
    assert "Stopped:" in page and "no-such-tag" in html.unescape(page) and 'http-equiv="refresh"' not in page


def test_a_source_the_operator_did_not_allow_is_refused(client, engine, checkout, tmp_path_factory, monkeypatch):
    """Through the dashboard a source is built by the root worker only from a folder of
    XFERLAB_SOURCE_DIRS or a URL under XFERLAB_SOURCE_URLS (runner.spec.source_policy);
    the same spec from the command line builds."""
    from runner.spec.model import SpecError, parse_spec

    elsewhere = tmp_path_factory.mktemp("not-allowed")
    subprocess.run(["git", "init", "-q", str(elsewhere)], check=True)
    for source, words in ((str(elsewhere), "XFERLAB_SOURCE_DIRS"),
                          (f"file://{elsewhere}", "XFERLAB_SOURCE_DIRS"),
                          ("https://example.org/pyftpdlib.git", "XFERLAB_SOURCE_URLS")):
        r = client.post("/bisect", data=_form(client, checkout, source=source))
        assert r.status_code == 422 and words in r.text and "as root" in r.text, (source, r.text[-800:])
    assert _count(engine) == 0
    data = {"servers": [{"name": "pyftpdlib", "source": str(elsewhere)}], "workloads": [{"name": "retr"}]}
    with pytest.raises(SpecError, match="XFERLAB_SOURCE_DIRS"):
        parse_spec(data, from_dashboard=True)
    assert parse_spec(data).servers[0].source == str(elsewhere.resolve())   # the command line's own user
    monkeypatch.setenv("XFERLAB_SOURCE_URLS", "https://example.org/pyftpdlib")
    url = {"servers": [{"name": "pyftpdlib", "source": "https://example.org/pyftpdlib.git", "ref": "v1"}],
           "workloads": [{"name": "retr"}]}
    with pytest.raises(SpecError, match="XFERLAB_SOURCE_URLS"):   # a prefix ends at a '/'
        parse_spec(url, from_dashboard=True)
    url["servers"][0]["source"] = "https://example.org/pyftpdlib/repo.git"
    assert parse_spec(url, from_dashboard=True).servers[0].source == "https://example.org/pyftpdlib/repo.git"


def test_the_api_refuses_a_source_outside_the_allowed_folders(client, auth, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("not-allowed-api")
    subprocess.run(["git", "init", "-q", str(elsewhere)], check=True)
    spec = {"name": "src", "repeats": 1, "backend": "local",
            "servers": [{"name": "pyftpdlib", "source": str(elsewhere)}], "workloads": [{"name": "retr"}]}
    r = client.post("/api/campaigns", json=spec, headers=auth)
    assert r.status_code == 422 and "XFERLAB_SOURCE_DIRS" in r.text, r.text[:500]
