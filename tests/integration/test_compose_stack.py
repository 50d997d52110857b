"""The compose stack end to end: its PostgreSQL (built offline from the Debian base)
stores a short campaign run by the CLI with the docker backend against all six
containerized servers; a server container killed mid-cell makes that cell ``failed``
with its reason while the campaign goes on.

Skipped (with the reason) only when no Docker engine answers or no Compose is installed.
The compose project is unique per session and torn down (volumes included) afterwards."""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from runner.store.models import Campaign, Cell, Sample
from tests.docker_support import SESSION_LABEL, cleanup_session, engine_and_compose, ensure_base, ensure_images
from tests.support.ports import free_port, free_ports

# Cold machine: the module fixture bootstraps the base and builds every image (about 11 min
# measured here; bounded by each build's own timeout), so the bound is wider than the default.
pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(2700)]

ROOT = Path(__file__).resolve().parents[2]
XFERLAB = [sys.executable, "-m", "runner.cli"]
SIX = ["pyftpdlib", "twisted", "vsftpd", "proftpd", "pureftpd", "tpd"]
SMALL = {"clients": 10, "file_size": "128K", "transfer_size": "4M", "duration": 0.3, "op_timeout": 20,
         "phase_timeout": 60}


@pytest.fixture(scope="module")
def stack():
    """`docker-compose up -d postgres` (unique project); yields (env for the CLI, db URL).

    Only postgres is started: the CLI runs the campaigns here (the whole stack is the
    last test's)."""
    client, compose = engine_and_compose()
    ensure_base(client)
    # both lab images now (the whole-stack test needs the app's too); built once, reused by
    # later runs (context hash unchanged)
    ensure_images(client, servers=SIX, labs=("xferlab/postgres:15", "xferlab/app:latest"))
    project = f"xfltest{os.getpid()}"
    pw = secrets.token_hex(12)
    port = free_port()
    env = {**os.environ, "POSTGRES_PASSWORD": pw, "XFERLAB_PG_PORT": str(port), "COMPOSE_PROJECT_NAME": project}
    base = [*compose, "-f", str(ROOT / "docker-compose.yml"), "-p", project]
    try:
        r = subprocess.run([*base, "up", "-d", "--no-build", "postgres"], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        cid = subprocess.run([*base, "ps", "-q", "postgres"], env=env, capture_output=True, text=True,
                             timeout=60).stdout.strip()
        deadline = time.monotonic() + 120
        health = ""
        while time.monotonic() < deadline:
            health = client.api.inspect_container(cid)["State"].get("Health", {}).get("Status", "")
            if health == "healthy":
                break
            time.sleep(1)
        assert health == "healthy", f"compose postgres not healthy after 120 s: {health}"
        url = f"postgresql://xferlab:{pw}@127.0.0.1:{port}/xferlab"
        cli_env = {**os.environ, "XFERLAB_DATABASE_URL": url, "XFERLAB_DOCKER_LABELS": f"xferlab.test={SESSION_LABEL}"}
        yield cli_env, url
    finally:
        subprocess.run([*base, "down", "-v", "--remove-orphans"], env=env, capture_output=True, timeout=300)
        cleanup_session(client)


def test_compose_file_requires_postgres_password():
    _, compose = engine_and_compose()
    env = {k: v for k, v in os.environ.items() if k != "POSTGRES_PASSWORD"}
    r = subprocess.run([*compose, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "set POSTGRES_PASSWORD" in (r.stdout + r.stderr)
    r = subprocess.run([*compose, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
                       env={**env, "POSTGRES_PASSWORD": "x"}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_short_campaign_all_six_servers_stored_in_compose_postgres(stack, tmp_path):
    cli_env, url = stack
    spec = {"name": "compose-six", "repeats": 2, "backend": "docker",
            "servers": [{"name": n} for n in SIX],
            "workloads": [{"name": w, "params": SMALL} for w in ("stor", "retr", "login")]}
    f = tmp_path / "spec.yaml"
    f.write_text(yaml.safe_dump(spec))
    p = subprocess.run([*XFERLAB, "run", str(f)], env=cli_env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "backend docker" in p.stdout
    eng = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with Session(eng) as s:
            camp = s.scalars(select(Campaign).where(Campaign.name == "compose-six")).one()
            bad = [(c.server_label, c.workload, c.error) for c in camp.cells if c.status != "done"]
            assert camp.status == "done" and not bad, bad
            assert camp.cells_total == 6 * 3 * 2
            names = set()
            for cell in camp.cells:
                metrics = {(x.metric, x.stat) for x in cell.samples}
                assert {("server_cgroup_mem", "current"), ("server_cgroup_mem", "peak"),
                        ("server_cgroup_mem", "anon"), ("server_mem_rss_minus_shared", "peak")} <= metrics
                assert cell.build.info["backend"] == "docker" and cell.build.info["image_id"].startswith("sha256:")
                names.add(cell.build.name)
            assert names == set(SIX)
            retr = s.scalars(select(Sample).join(Cell).where(Cell.campaign_id == camp.id, Cell.workload == "retr",
                                                             Sample.metric == "throughput")).all()
            assert len(retr) == 12 and all(x.value > 1 for x in retr)
    finally:
        eng.dispose()


def test_server_container_killed_mid_cell_fails_that_cell_only(stack, tmp_path):
    import docker

    cli_env, url = stack
    client = docker.from_env()
    spec = {"name": "kill-mid-cell", "repeats": 3, "backend": "docker", "warmup": False,
            "servers": [{"name": "pyftpdlib"}],
            "workloads": [{"name": "retr", "params": {**SMALL, "duration": 4.0, "transfer_size": "64M"}}]}
    f = tmp_path / "spec.yaml"
    f.write_text(yaml.safe_dump(spec))
    proc = subprocess.Popen([*XFERLAB, "run", str(f)], env=cli_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
    reader.start()
    killed = None
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and killed is None and proc.poll() is None:
            for c in client.containers.list(filters={"label": [f"xferlab.test={SESSION_LABEL}",
                                                               "xferlab.server=pyftpdlib"]}):
                if c.id not in seen:
                    seen.append(c.id)
                if len(seen) >= 2 and c.id == seen[1]:
                    time.sleep(2.5)  # inside the 4 s measured RETR of the second cell
                    c.kill()
                    killed = c.id
                    break
            time.sleep(0.2)
        assert killed, f"never saw the second cell's container; output: {''.join(out)[-2000:]}"
        proc.wait(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    eng = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with Session(eng) as s:
            camp = s.scalars(select(Campaign).where(Campaign.name == "kill-mid-cell")).one()
            cells = sorted(camp.cells, key=lambda c: c.seq)
            assert [c.status for c in cells] == ["done", "failed", "done"], [(c.status, c.error) for c in cells]
            assert "server not running" in cells[1].error and "exit" in cells[1].error, cells[1].error
    finally:
        eng.dispose()


def test_whole_stack_dashboard_queues_worker_runs(tmp_path):
    """`docker-compose up` of the whole lab (postgres, dashboard, worker, all from images
    built offline): a campaign queued through the dashboard's API is claimed and run by
    the worker container against containerized servers, and its figures are served back."""
    import html
    import json
    import urllib.request

    client, compose = engine_and_compose()
    ensure_base(client)
    ensure_images(client, servers=("pyftpdlib", "tpd"), labs=("xferlab/postgres:15", "xferlab/app:latest"))
    project = f"xflstack{os.getpid()}"
    token = secrets.token_hex(12)
    pg_port, web_port = free_ports(2)
    env = {**os.environ, "POSTGRES_PASSWORD": secrets.token_hex(12), "XFERLAB_PG_PORT": str(pg_port),
           "XFERLAB_DASHBOARD_PORT": str(web_port), "XFERLAB_API_TOKEN": token, "COMPOSE_PROJECT_NAME": project,
           "XFERLAB_DOCKER_LABELS": f"xferlab.test={SESSION_LABEL}"}
    base = [*compose, "-f", str(ROOT / "docker-compose.yml"), "-p", project]
    web = f"http://127.0.0.1:{web_port}"

    def get(path: str) -> dict:
        return json.loads(urllib.request.urlopen(web + path, timeout=10).read())

    try:
        r = subprocess.run([*base, "up", "-d", "--no-build"], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        deadline = time.monotonic() + 120
        while True:  # the dashboard answers once postgres is healthy and migrations ran
            try:
                get("/api/campaigns")
                break
            except OSError:
                assert time.monotonic() < deadline, subprocess.run([*base, "logs", "--tail", "50"], env=env,
                                                                   capture_output=True, text=True).stdout
                time.sleep(1)
        assert urllib.request.urlopen(web + "/static/vendor/chart.min.js", timeout=10).status == 200
        spec = {"name": "whole-stack", "repeats": 1, "backend": "docker", "warmup": False,
                "servers": [{"name": "pyftpdlib"}, {"name": "tpd"}],
                "workloads": [{"name": w, "params": SMALL} for w in ("retr", "login")]}
        req = urllib.request.Request(web + "/api/campaigns", data=json.dumps(spec).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {token}"})
        cid = json.loads(urllib.request.urlopen(req, timeout=30).read())["id"]
        deadline = time.monotonic() + 400
        while (d := get(f"/api/campaigns/{cid}"))["status"] in ("queued", "running"):
            assert time.monotonic() < deadline, d
            time.sleep(2)
        logs = subprocess.run([*base, "logs", "--tail", "60", "worker"], env=env, capture_output=True,
                              text=True).stdout
        assert d["status"] == "done" and d["cells_done"] == 4, (d, logs)
        # the cells were run by the worker container's process (host PID namespace: host PIDs)
        wid = subprocess.run([*base, "ps", "-q", "worker"], env=env, capture_output=True, text=True,
                             timeout=60).stdout.strip()
        top = client.containers.get(wid).top()
        pids = {row[top["Titles"].index("PID")] for row in top["Processes"]}
        assert len(d["latest"]) == 4 and {c["worker"].rsplit(":", 1)[1] for c in d["latest"]} <= pids, top
        page = html.unescape(urllib.request.urlopen(f"{web}/campaigns/{cid}", timeout=10).read().decode())
        assert "RETR (server -> client)" in page and "tpd" in page
        # the worker (CAP_SYS_ADMIN) joined each server's namespace, as the CLI on the host does
        assert "loopback in each server container's network namespace" in page, logs
        rst = urllib.request.urlopen(f"{web}/api/campaigns/{cid}/export?format=rst", timeout=10).read().decode()
        assert "RETR (server -> client)" in rst
    finally:
        subprocess.run([*base, "down", "-v", "--remove-orphans"], env=env, capture_output=True, timeout=300)
        cleanup_session(client)
