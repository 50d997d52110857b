"""End to end: the CLI runs real servers, stores in the real PostgreSQL, survives a kill."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from runner.store.models import Campaign, Cell, Sample
from tests.support.skips import machine_lacks

pytestmark = pytest.mark.integration

XFERLAB = [sys.executable, "-m", "runner.cli"]
SMALL = {"clients": 20, "file_size": "256K", "transfer_size": "8M", "duration": 0.3, "op_timeout": 20,
         "phase_timeout": 60}


def _run(args, env, timeout=600, check=True):
    p = subprocess.run(XFERLAB + args, env=env, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"xferlab {' '.join(args)} exited {p.returncode}\nstdout:\n{p.stdout}\n"
                             f"stderr:\n{p.stderr}")
    return p


def _write_spec(tmp_path: Path, **kw) -> Path:
    spec = {"name": "it", "repeats": 2, "servers": [{"name": "pyftpdlib", "version": "2.2.0"}],
            "workloads": [{"preset": "classic", "params": SMALL}]}
    spec.update(kw)
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(spec))
    return p


def test_classic_suite_small_end_to_end(tmp_path, xferlab_env, db_url):
    spec = _write_spec(tmp_path, servers=[{"name": "pyftpdlib", "version": "2.2.0"},
                                          {"name": "pyftpdlib", "version": "2.2.0",
                                           "variant": {"use_sendfile": False}}])
    p = _run(["run", str(spec)], xferlab_env)
    out = p.stdout
    assert "campaign 1" in out
    assert "RETR (server -> client)" in out
    assert "20 concurrent clients (connect, login)" in out
    engine = create_engine(db_url)
    with Session(engine) as s:
        camp = s.get(Campaign, 1)
        assert camp.status == "done", [(c.workload, c.error) for c in camp.cells if c.status != "done"]
        assert camp.cells_total == 2 * 8 * 2 and camp.cells_done == camp.cells_total
        # every done cell has its primary metric and server memory
        for cell in camp.cells:
            metrics = {(x.metric, x.stat) for x in cell.samples}
            assert ("elapsed", "value") in metrics
            assert ("server_mem_rss_minus_shared", "peak") in metrics
            assert ("server_mem_uss", "start") in metrics
            assert ("client_cpu", "user") in metrics
            # the kernel's TCP counters of the server's namespace over the phase, and its backlog
            assert ("tcp", "ListenOverflows") in metrics and ("tcp", "RetransSegs") in metrics, metrics
            backlog = next(x for x in cell.samples if x.metric == "listen_backlog")
            assert backlog.value == 1024 and backlog.raw, backlog.raw  # the lab's backlog for pyftpdlib
            # the server's CPU cost of the work: per GiB moved, or per operation. 20 logins or
            # QUITs, and 20 concurrent 256 KiB transfers (5 MiB, sendfile), can cost less than
            # the 10 ms clock tick of the CPU figures (/proc/PID/stat): 0 is a value there; the
            # single-stream rows move 8 MiB transfers for 0.3 s and must show a cost
            per_op = cell.workload in ("login", "quit")
            tiny = per_op or cell.workload.endswith("_concurrent")
            cost = "server_cpu_per_op" if per_op else "server_cpu_per_gib"
            assert any(x.metric == cost and (x.value >= 0 if tiny else x.value > 0) for x in cell.samples), \
                (cell.workload, metrics)
            # where the cell's time went (runner.catalogue.stages.STAGES), the database write included
            stages = {x.stat: x.value for x in cell.samples if x.metric == "cell_time"}
            assert {"check", "start", "probe", "warmup", "phase", "measured", "stop", "store"} <= set(stages), stages
            assert stages["measured"] <= stages["phase"] and stages["probe"] <= stages["start"]
            assert cell.build_id is not None and cell.environment_id is not None
            # which driver made the load is recorded with the cell (its environment snapshot)
            assert cell.environment.data["driver"]["name"] == "xferlab-ftp"
            assert cell.environment.data["driver"]["event_loop"] == "uvloop"
        # the backend made ready once, before the first cell: that cell's stage of its own
        prepared = [c for c in camp.cells if any(x.metric == "cell_time" and x.stat == "prepare" for x in c.samples)]
        assert len(prepared) == 1 and prepared[0].started_at == min(c.started_at for c in camp.cells), prepared
        retr = s.scalars(select(Sample).join(Cell).where(Cell.workload == "retr", Sample.metric == "throughput"))
        assert all(x.value > 10 for x in retr)  # MiB/s, confirmed bytes
    engine.dispose()
    p = _run(["show", "1", "--timing"], xferlab_env)
    assert "Where the time of campaign 1 went (32 cells)" in p.stdout and "warmup" in p.stdout, p.stdout
    assert "Per server" in p.stdout and "pyftpdlib 2.2.0" in p.stdout.split("Per server")[1], p.stdout
    assert re.search(r"measured span: [\d.]+ s, [\d.]+% of the campaign's wall time", p.stdout), p.stdout
    p = _run(["campaigns"], xferlab_env)
    assert "it" in p.stdout and "done" in p.stdout
    p = _run(["export", "1", "--format", "json"], xferlab_env)
    doc = json.loads(p.stdout)
    assert doc["format"] == "xferlab-results"
    p = _run(["compare", "pyftpdlib 2.2.0", "pyftpdlib 2.2.0 [use_sendfile=False]", "--format", "rst"],
             xferlab_env)
    assert "RETR (server -> client)" in p.stdout


def test_client_processes_split_the_clients_and_merge(tmp_path, xferlab_env, db_url):
    """client_processes: 2 on the local backend: the N-client workloads ran from two
    load-generator processes (one client_host sample each), single-stream ones in one."""
    spec = _write_spec(tmp_path, name="procs", repeats=1, backend="local", client_processes=2,
                       workloads=[{"name": w, "params": SMALL} for w in ("login", "stor_concurrent", "retr")])
    _run(["run", str(spec)], xferlab_env)
    with Session(create_engine(db_url)) as s:
        camp = s.scalars(select(Campaign).where(Campaign.name == "procs")).one()
        assert camp.status == "done", [(c.workload, c.error) for c in camp.cells if c.status != "done"]
        for cell in camp.cells:
            rows = sorted((x.stat, x.value) for x in cell.samples if x.metric == "client_host")
            if cell.workload == "retr":
                assert rows == []
            else:
                assert rows == [("process 1", 10.0), ("process 2", 10.0)], (cell.workload, rows)
            errors = next(x.value for x in cell.samples if x.metric == "errors" and x.stat == "total")
            assert errors == 0
            if cell.workload == "stor_concurrent":
                moved = next(x.value for x in cell.samples if x.metric == "bytes")
                assert moved == 20 * 256 * 1024


def test_kill_midway_keeps_finished_cells(tmp_path, xferlab_env, engine):
    spec = _write_spec(tmp_path, repeats=3, workloads=[{"name": "login", "params": SMALL},
                                                       {"name": "retr", "params": SMALL}])
    t_start = time.time() - 1
    proc = subprocess.Popen(XFERLAB + ["run", str(spec)], env=xferlab_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    done = 0
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            with Session(engine) as s:
                camp = s.get(Campaign, 1)
                done = camp.cells_done if camp else 0
            if done >= 3:
                break
            time.sleep(0.2)
        assert done >= 3, "campaign did not get 3 cells done in time"
        os.kill(proc.pid, signal.SIGKILL)  # the runner only: its servers must die with it
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    with Session(engine) as s:
        cells = s.scalars(select(Cell).where(Cell.campaign_id == 1).order_by(Cell.seq)).all()
        finished = [c for c in cells if c.status == "done"]
        assert len(finished) >= 3
        for c in finished:
            assert any(x.metric == "elapsed" for x in c.samples)
        assert any(c.status in ("queued", "running") for c in cells)
    p = _run(["campaigns"], xferlab_env)
    assert "interrupted" in p.stdout
    # resume runs what is left; the cell that was in flight is recorded as failed
    time.sleep(0.5)
    import psutil

    orphans = [p.info for p in psutil.process_iter(["pid", "cmdline", "create_time"])
               if "servers/pyftpdlib/serve.py" in " ".join(p.info["cmdline"] or [])
               and p.info["create_time"] >= t_start]
    assert not orphans, f"servers outlived the killed runner: {orphans}"
    p = _run(["resume", "1"], xferlab_env, check=False)
    with Session(engine) as s:
        camp = s.get(Campaign, 1)
        assert camp.cells_done + camp.cells_failed == camp.cells_total
        assert camp.cells_done >= camp.cells_total - 1
        backend = camp.backend
    if backend == "docker":  # the killed runner's server container was removed by the next run
        import docker

        client = docker.from_env()
        left = client.containers.list(all=True, filters={"label": f"xferlab.owner_pid={proc.pid}"})
        assert not left, [(c.name, c.status) for c in left]
        assert not client.volumes.list(filters={"label": f"xferlab.owner_pid={proc.pid}"})


def _descendants_named(pid: int, name: str) -> list:
    """The live descendants of ``pid`` whose name is ``name`` (psutil.Process); a process
    that exits between the listing and the read of its name (the run's short-lived
    helpers: ip, tc, sysctl) is left out, as is everything when ``pid`` itself is gone."""
    import psutil

    found = []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for p in children:
        try:
            if p.name() == name:
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


def test_sigterm_mid_phase_leaves_no_client_link_or_server(tmp_path, xferlab_env):
    """`xferlab run` stopped by SIGTERM while 8 wget processes download over a shaped
    link (local backend, tpd): exit 130, the campaign cancelled, and nothing of the cell
    left: no client process, no server process, no link namespace."""
    import psutil

    from runner.net.link import base_problem

    if shutil.which("wget") is None:
        pytest.skip("wget is not installed")
    why = base_problem()
    if why and os.geteuid() != 0:
        machine_lacks(f"root: {why}")
    if why:
        pytest.skip(why)
    spec = _write_spec(tmp_path, name="term", repeats=1, backend="local", warmup=False, link=["100mbit"],
                       servers=[{"name": "tpd"}],
                       workloads=[{"name": "retr_concurrent", "params": {"clients": 8, "file_size": "8M",
                                                                         "driver": "wget"}}])
    proc = subprocess.Popen(XFERLAB + ["run", str(spec)], env=xferlab_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline, seen = time.monotonic() + 120, []
        while time.monotonic() < deadline and proc.poll() is None:
            seen = _descendants_named(proc.pid, "wget")
            if len(seen) == 8:
                break
            time.sleep(0.1)
        assert len(seen) == 8, "the wget clients did not start in time"
        family = psutil.Process(proc.pid).children(recursive=True)  # clientspawn, wget, tpd
        time.sleep(0.5)  # mid-transfer: 64 MiB take about 6 s over 100 Mbit/s
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    gone, alive = psutil.wait_procs(family, timeout=5)
    assert not alive, [(p.pid, p.name()) for p in alive]
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"xl-{proc.pid}-" not in names
