"""The HTTP servers under test under the local backend on 127.0.0.1: PUT and
POST uploads stored under <home>/uploads, GET of a placed file, 400 for bad names, 413
over max_body (every server launched with it, default 1 GiB), keep-alive, stored_files,
the storage axis, workers; a server whose binary is missing is skipped with its reason."""
from __future__ import annotations

import http.client
import shutil

import psutil
import pytest

from runner.backends.base import ServerFailed, ServerSkipped
from runner.backends.local import LocalBackend, available_servers
from runner.backends.local.recipes import RECIPES
from runner.backends.local.rundir import RunDir
from runner.catalogue.servers import DEFAULT_MAX_BODY, HTTP_SERVERS, UNAVAILABLE_SERVERS, upload_skip_reason
from runner.spec.request import ServerRequest
from tests.runner.backends.http_checks import (
    check_413,
    check_interface,
    declared_body_answer,
    max_body_of,
    raw_two_requests,
)
from tests.runner.support import check_or_skip, start_or_skip

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

NAMES = sorted(HTTP_SERVERS)


def _connect(h):
    return lambda: http.client.HTTPConnection(h.target.host, h.target.http_port, timeout=10)


@pytest.mark.parametrize("name", NAMES)
def test_http_interface(backend, name):
    h = start_or_skip(backend, ServerRequest(name))
    try:
        assert h.alive()
        info = h.build_info
        assert info["greeting"].startswith("HTTP/1.1" if name != "tpd" else "220")
        assert info["version"] and len(info["config_hash"]) == 64
        check_interface(name, h, _connect(h))
        out = raw_two_requests(h.target.host, h.target.http_port)
        assert out.count(b"HTTP/1.1 200") == 2, out[:300]
    finally:
        h.stop()
    assert not h.alive()


@pytest.mark.parametrize("name", NAMES)
def test_http_413_over_max_body(backend, name):
    h = start_or_skip(backend, ServerRequest(name, variant={"max_body": 4096}))
    try:
        check_413(h, _connect(h), 4096)
    finally:
        h.stop()


@pytest.mark.parametrize("variant, bound", [({}, DEFAULT_MAX_BODY), ({"max_body": "64m"}, 64 << 20)])
@pytest.mark.parametrize("name", NAMES)
def test_every_http_server_is_launched_with_the_upload_bound(backend, tmp_path, name, variant, bound):
    """The local recipe of every HTTP server, tpd included, starts it with the variant's
    ``max_body`` (default 1 GiB): the bound is in its argv (nginx: its config)."""
    req = ServerRequest(name, variant=variant)
    check_or_skip(backend, req)
    recipe = {r.name: r for r in RECIPES}[name](backend)
    run = RunDir(tmp_path, tmp_path / "home", tmp_path / "logs")
    run.home.mkdir()
    run.logs.mkdir()
    launch = recipe.launch(req, run, 40001)  # builds the command line, starts nothing
    assert max_body_of(launch.argv, launch.config_text) == bound, launch.argv


@pytest.mark.parametrize("method, path", [("PUT", "/uploads/huge.bin"), ("POST", "/uploads/")])
def test_tpd_as_the_lab_starts_it_refuses_a_terabyte(backend, method, path):
    """tpd started by the local backend with the default variant answers a declared
    1 TiB body with 413 at once and never invites it with 100 Continue."""
    h = start_or_skip(backend, ServerRequest("tpd"))
    try:
        for expect in (True, False):
            got = declared_body_answer(h.target.host, h.target.http_port, method, path, 1 << 40, expect)
            assert got.startswith(b"HTTP/1.1 413 ") and b"100 Continue" not in got, got[:200]
        assert h.stored_files("uploads") == []
    finally:
        h.stop()


@pytest.mark.parametrize("storage", ["disk", "tmpfs"])
def test_storage_axis_applies_to_http_servers(backend, storage):
    h = start_or_skip(backend, ServerRequest("go-http", variant={"storage": storage}))
    try:
        assert h.build_info["storage"] == storage
        assert (h.build_info["storage_fs"] in ("tmpfs", "ramfs")) == (storage == "tmpfs")
        c = _connect(h)()
        c.request("PUT", "/uploads/s.bin", body=b"s" * 100)
        assert c.getresponse().status == 201
        assert h.stored_files() == [("s.bin", 100)]
    finally:
        h.stop()


@pytest.mark.parametrize("late_worker_s", [0.0, 1.5], ids=["as-started", "third-worker-late"])
def test_node_workers_round_robin(backend, late_worker_s, tmp_path, monkeypatch):
    """Six connections after the start reach all three workers: the server is ready only
    once every worker listens (the primary hands connections only to listening ones). The
    second case holds the third worker 1.5 s before it runs server.js (a NODE_OPTIONS
    preload); a readiness probe that any listening worker answers lets the six land on two."""
    if late_worker_s:
        hold = tmp_path / "hold_third_worker.js"
        hold.write_text("const c = require('cluster');\n"
                        f"if (c.isWorker && c.worker.id === 3) {{ const end = Date.now() + {late_worker_s * 1000:.0f}; "
                        "while (Date.now() < end) {} }\n")
        monkeypatch.setenv("NODE_OPTIONS", f"--require {hold}")
    h = start_or_skip(backend, ServerRequest("node-http", variant={"workers": 3}))
    try:
        assert h.build_info["startup_s"] >= late_worker_s, h.build_info["startup_s"]
        assert len(psutil.Process(h.pid).children()) == 3
        for i in range(6):  # new connection each: the primary hands them out round-robin
            c = _connect(h)()
            c.request("POST", "/uploads/", body=b"w" * i)
            r = c.getresponse()
            r.read()
            assert r.status == 201
            c.close()
        names = [n for n, _ in h.stored_files()]
        assert len(names) == 6 and len({n.split("-")[1] for n in names}) == 3  # p-<worker pid>-<n>
    finally:
        h.stop()


def test_keepalive_false_closes(backend):
    h = start_or_skip(backend, ServerRequest("go-http", variant={"keepalive": False}))
    try:
        c = _connect(h)()
        c.request("PUT", "/uploads/k.bin", body=b"k")
        r = c.getresponse()
        r.read()
        assert r.status == 201 and r.getheader("Connection") == "close"
    finally:
        h.stop()


def test_missing_binary_is_skipped_with_reason(monkeypatch, backend):
    from runner.backends.local.recipes import http as http_recipes

    monkeypatch.setattr(http_recipes.NginxRecipe, "binary", "/nonexistent/nginx")
    monkeypatch.setattr(http_recipes.shutil, "which", lambda _n: None)
    b = LocalBackend(auto_fetch=False)
    for name, hint in (("nginx", "apt-get install nginx"), ("node-http", "apt-get install nodejs")):
        with pytest.raises(ServerSkipped, match=hint):
            b.check(ServerRequest(name))
    reasons = dict(available_servers(b))
    assert "apt-get install nginx" in (reasons["nginx"] or "")


def test_a_go_http_source_that_does_not_compile_is_a_failure(monkeypatch, tmp_path, backend, request):
    """servers/go-http with a syntax error, built by the real Go toolchain: check() raises
    ServerFailed with the compiler's own lines, and the cell is ``failed`` with them, never
    ``skipped``."""
    from runner.backends import paths
    from runner.backends.local.recipes.base import source_hash
    from runner.backends.local.venvs import cache_dir
    from runner.cell.local import run_local_cell
    from runner.spec.model import parse_spec
    from runner.store.models import Cell

    check_or_skip(backend, ServerRequest("go-http"))  # the toolchain is there (the real source builds)
    servers = tmp_path / "servers"
    shutil.copytree(paths.SERVERS_DIR / "go-http", servers / "go-http")
    main = servers / "go-http" / "main.go"
    main.write_text(main.read_text() + "\nfunc broken( {\n")
    monkeypatch.setattr(paths, "SERVERS_DIR", servers)
    broken_out = cache_dir() / "go-http" / source_hash(servers / "go-http", frozenset({".go", ".mod"}))
    request.addfinalizer(lambda: (shutil.rmtree(broken_out, ignore_errors=True),
                                  broken_out.with_name(f"{broken_out.name}.lock").unlink(missing_ok=True)))
    with pytest.raises(ServerFailed, match=r"(?s)go-http: go build failed \(exit \d+\):.*main\.go:\d+:\d+: syntax err"):
        backend.check(ServerRequest("go-http"))
    spec = parse_spec({"name": "broken", "repeats": 1, "warmup": False, "driver": "xferlab-http", "pinning": {},
                       "servers": [{"name": "go-http"}],
                       "workloads": [{"name": "http_download", "params": {"clients": 1, "duration": 0.2}}]})
    srv, params = spec.servers[0], spec.workloads[0].params
    cell = Cell(id=1, seq=0, server="go-http", server_label=srv.display(), server_spec=srv.model_dump(mode="json"),
                workload="http_download", params=params.model_dump(mode="json"), params_key="", repeat=0)
    out = run_local_cell(cell, spec, backend)
    assert out.status == "failed", (out.status, out.error)
    assert "go-http: go build failed" in out.error and "syntax error" in out.error, out.error


def test_catalogue_notes():
    assert upload_skip_reason("nginx", "POST") and "DAV" in upload_skip_reason("nginx", "POST")
    assert upload_skip_reason("nginx", "PUT") is None and upload_skip_reason("tpd", "POST") is None
    assert upload_skip_reason("vsftpd", "PUT") == "vsftpd does not speak HTTP"
    assert {"grizzly", "mordor", "vibe.d"} == set(UNAVAILABLE_SERVERS)
