"""Servers built from source (runner.backends.source, runner.backends.local.srcbuild, the
docker backend's source images): a ref resolved to its commit, a dirty checkout to its
diff hash, the tree exported as that commit has it, the build record's ``source`` entry,
and a ref that does not resolve or a source that does not build as a failed cell."""
from __future__ import annotations

import hashlib
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.backends.base import ServerFailed
from runner.backends.paths import REPO_ROOT
from runner.backends.source import export, resolve
from runner.spec.request import ServerRequest
from tests.support.source_image import start_at_commit

DATE = "2026-02-03T04:05:06Z"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_AUTHOR_DATE": DATE, "GIT_COMMITTER_DATE": DATE}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A two-commit repository; the build cache under this test's own data dir."""
    monkeypatch.setenv("XFERLAB_DATA_DIR", str(tmp_path / "data"))
    from runner.config import get_settings

    get_settings.cache_clear()
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q", "-b", "main")
    (r / "a.txt").write_text("one\n")
    _git(r, "add", "-A")
    _git(r, "commit", "-qm", "first")
    (r / "a.txt").write_text("two\n")
    (r / "b.txt").write_text("new\n")
    _git(r, "add", "-A")
    _git(r, "commit", "-qm", "second: b.txt")
    yield r
    get_settings.cache_clear()


def test_a_ref_resolves_to_its_commit_and_exports_that_tree(repo):
    first = _git(repo, "rev-parse", "HEAD~1")
    src = resolve(str(repo), "main~1")
    assert src.info() == {"location": str(repo), "ref": "main~1", "commit": first, "dirty_hash": None,
                          "subject": "first", "author_date": "2026-02-03T04:05:06Z", "commit_index": 1}
    tree = export(src)
    assert sorted(p.name for p in tree.iterdir()) == ["a.txt"] and (tree / "a.txt").read_text() == "one\n"
    assert tree == src.build_root / "tree" and src.build_root.name == first[:16]
    head = resolve(str(repo), "main")
    assert head.commit_index == 2 and head.subject == "second: b.txt"
    assert (export(head) / "b.txt").read_text() == "new\n"


def test_a_dirty_checkout_is_keyed_by_its_diff(repo):
    clean = resolve(str(repo), None)
    assert clean.dirty_hash is None and clean.key == clean.commit[:16]
    (repo / "a.txt").write_text("edited\n")
    diff = subprocess.run(["git", "diff", "HEAD", "--binary"], cwd=repo, capture_output=True, check=True).stdout
    edited = resolve(str(repo), None)
    assert edited.dirty_hash == hashlib.sha256(diff).hexdigest()  # no untracked file: the diff alone
    (repo / "c.txt").write_text("untracked\n")
    both = resolve(str(repo), None)
    assert both.dirty_hash not in (None, edited.dirty_hash) and both.key == f"{both.commit[:16]}-{both.dirty_hash[:12]}"
    tree = export(both)
    assert (tree / "a.txt").read_text() == "edited\n" and (tree / "c.txt").read_text() == "untracked\n"
    assert export(resolve(str(repo), "main")) != tree  # the commit itself stays apart
    assert resolve(str(repo), "main").dirty_hash is None  # a ref ignores the working tree


def test_a_file_url_is_mirrored(repo):
    src = resolve(f"file://{repo}", "main")
    assert src.commit == _git(repo, "rev-parse", "HEAD") and src.repo.name.endswith(".git")
    assert (export(src) / "b.txt").is_file()


def test_a_ref_that_does_not_resolve_fails_with_gits_words(repo, tmp_path):
    with pytest.raises(ServerFailed) as ei:
        resolve(str(repo), "no-such-branch")
    assert "ref 'no-such-branch' does not resolve to a commit" in str(ei.value)
    assert "fatal: Needed a single revision" in str(ei.value)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ServerFailed, match="not a git checkout"):
        resolve(str(plain), None)


def test_a_python_source_that_does_not_build_is_a_failure_with_pips_lines(repo):
    from runner.backends.local import LocalBackend

    (repo / "pyproject.toml").write_text("[project]\nname = 'pyftpdlib'\nversion = 'not a version'\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "a broken pyproject")
    said: list[str] = []
    b = LocalBackend(progress=said.append)
    with pytest.raises(ServerFailed) as ei:
        b.check(ServerRequest("pyftpdlib", source=str(repo), ref="main"))
    msg = str(ei.value)
    assert msg.startswith("pyftpdlib at ") and "pip install" in msg and "failed (exit 1)" in msg
    assert "version" in msg.split("failed (exit 1)")[1]  # pip's own words about the bad version
    with pytest.raises(ServerFailed) as again:  # the next cell: the same failure, not the same build again
        b.check(ServerRequest("pyftpdlib", source=str(repo), ref="main"))
    assert str(again.value) == msg and sum(m.startswith("building pyftpdlib") for m in said) == 1


@pytest.mark.integration
def test_tpd_from_this_repository_at_a_ref(backend, tmp_path, monkeypatch):
    monkeypatch.setenv("XFERLAB_DATA_DIR", str(tmp_path / "data"))
    from runner.config import get_settings

    get_settings.cache_clear()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    h = backend.start(ServerRequest("tpd", source=str(REPO_ROOT), ref=head))
    try:
        info = h.build_info
        assert info["version"] == f"git-{head[:12]}" and info["source"]["commit"] == head
        assert set(info["source"]) == {"location", "ref", "commit", "dirty_hash", "subject", "author_date",
                                       "commit_index"}
        assert info["binary"] == str(tmp_path / "data" / "builds" / head[:16] / "tpd" / "tpd")
        assert info["greeting"].startswith("220")
    finally:
        h.stop()
        get_settings.cache_clear()


@pytest.mark.integration
def test_an_unresolved_ref_is_a_failed_cell(engine, tmp_path):
    from runner.campaign.loop import run_campaign
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell

    subprocess.run(["git", "init", "-q", "-b", "main", str(tmp_path / "empty")], check=True)
    spec = parse_spec({"servers": [{"name": "pyftpdlib", "source": str(tmp_path / "empty"), "ref": "v9.9"}],
                       "workloads": [{"name": "login", "params": {"clients": 1}}], "repeats": 1,
                       "backend": "local", "warmup": False})
    with Session(engine) as s:
        cid = crud.create_campaign(s, spec=spec, backend="local").id
        s.commit()
    run_campaign(engine, cid)
    with Session(engine) as s:
        status, error = s.execute(select(Cell.status, Cell.error).where(Cell.campaign_id == cid)).one()
    assert status == "failed", error
    assert "ref 'v9.9' does not resolve to a commit" in error and "fatal: Needed a single revision" in error


@pytest.mark.docker
def test_tpd_at_a_ref_in_a_container_image_tagged_by_the_commit(dbackend, client):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    h = start_at_commit(dbackend, client, ServerRequest("tpd", source=str(REPO_ROOT), ref=head), head,
                        f"git-{head[:12]}")
    h.stop()


@contextmanager
def _started_at_head(backend, tmp_path: Path, monkeypatch, server: str):
    """``server`` built from this repository at HEAD (its build cache in ``tmp_path``) and
    started on ``backend``; yields (its build_info, HEAD's commit) and stops it."""
    monkeypatch.setenv("XFERLAB_DATA_DIR", str(tmp_path / "data"))
    from runner.config import get_settings

    get_settings.cache_clear()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    try:
        h = backend.start(ServerRequest(server, source=str(REPO_ROOT), ref=head))
        try:
            assert h.build_info["source"]["commit"] == head
            yield h.build_info, head
        finally:
            h.stop()
    finally:
        get_settings.cache_clear()


@pytest.mark.integration
def test_go_http_from_this_repository_at_a_ref(backend, tmp_path, monkeypatch):
    with _started_at_head(backend, tmp_path, monkeypatch, "go-http") as (info, head):
        assert info["version"].startswith("go") and info["version"].endswith(f"-git-{head[:12]}")
        assert info["binary"] == str(tmp_path / "data" / "builds" / head[:16] / "go-http" / "go-http")


@pytest.mark.integration
def test_netty_server_of_this_repository_at_a_ref(backend, tmp_path, monkeypatch):
    with _started_at_head(backend, tmp_path, monkeypatch, "netty") as (info, head):
        assert info["version"].endswith(f"+git-{head[:12]}")
        assert (tmp_path / "data" / "builds" / head[:16] / "netty" / "NettyServer.class").is_file()


def test_a_mirrored_commit_is_not_fetched_again(repo):
    url = f"file://{repo}"
    head = resolve(url, "main")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "third")
    again = resolve(url, head.commit)  # a full SHA the mirror has: no fetch, the mirror's main stays put
    assert again.commit == head.commit and _git(again.repo, "rev-parse", "refs/heads/main") == head.commit
    assert resolve(url, "main").subject == "third"  # a branch is fetched each time
    assert _git(again.repo, "rev-parse", "refs/heads/main") != head.commit


def test_a_checkouts_own_config_runs_no_program(repo, tmp_path):
    marker = tmp_path / "ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\necho x\n")
    hook.chmod(0o755)
    _git(repo, "config", "core.fsmonitor", str(hook))
    _git(repo, "config", "diff.external", str(hook))
    (repo / "a.txt").write_text("dirty\n")
    src = resolve(str(repo), None)
    assert src.dirty_hash is not None and (export(src) / "a.txt").read_text() == "dirty\n"
    assert not marker.exists()
