"""A whole cell (runner.cell.local.run_local_cell: warm-up, measured phase, sample rows,
outcome) with a real-client driver against the tests' pyftpdlib on loopback."""
from __future__ import annotations

from pathlib import Path

from runner.cell.local import run_local_cell
from runner.load.target import Target
from runner.spec.model import parse_spec
from runner.store.models import Cell
from tests.runner.support import FixedBackend, RunningHandle, driver_or_skip, local_server_or_skip
from tests.support.pyftpd import PASSWORD, USER, start_pyftpd, stop


def _backend(home: Path, port: int, password: str) -> FixedBackend:
    """The tests' pyftpdlib on ``port`` (already running) as the cell's backend."""
    return FixedBackend(RunningHandle(Target("127.0.0.1", port, USER, password, root=home), "pyftpdlib"))


def _cell(tmp_path: Path, driver: str, workload: str, password: str, **params):
    driver_or_skip(driver)
    spec = parse_spec({"name": "c", "repeats": 1, "warmup": True, "driver": driver, "pinning": {},
                       "servers": [{"name": "pyftpdlib"}], "workloads": [{"name": workload, "params": params}]})
    p = spec.workloads[0].params
    cell = Cell(id=1, seq=0, server="pyftpdlib", server_label="pyftpdlib",
                server_spec=spec.servers[0].model_dump(mode="json"), workload=workload,
                params=p.model_dump(mode="json"), params_key="", repeat=0)
    proc, port = start_pyftpd(tmp_path)
    try:
        return run_local_cell(cell, spec, _backend(tmp_path, port, password))
    finally:
        stop(proc)


def test_lftp_cell_done_with_process_rows(tmp_path):
    out = _cell(tmp_path, "lftp", "retr_concurrent", PASSWORD, clients=3, file_size=65536,
                client_options={"xfer:buffer-size": "0x20000"})
    assert out.status == "done", out.error
    rows = {(s.metric, s.stat): s for s in out.samples}
    assert rows[("bytes", "value")].value == 3 * 65536 and rows[("errors", "total")].value == 0
    assert rows[("client_max_rss", "max")].value >= rows[("client_max_rss", "median")].value > 1 << 20
    assert len(rows[("client_max_rss", "max")].raw) == 3
    assert rows[("client_page_faults", "minor")].value > 0
    assert ("fairness", "jain") in rows and ("client_cpu", "user") in rows


def test_curl_cell_with_a_wrong_password_fails_naming_the_client(tmp_path):
    out = _cell(tmp_path, "curl", "stor_concurrent", "wrong", clients=2, file_size=1000)
    assert out.status == "failed"
    assert out.error.startswith("2 failed operations (client_exit=2): first client_exit: curl client 0 (pid ")
    assert "exit status 67; stderr: curl: (67) Access denied: 530" in out.error


def test_stored_and_read_back_as_series(tmp_path, engine):
    """The cell's rows stored in PostgreSQL and read back by the report layer: the
    per-process series, and the options in the row title."""
    from sqlalchemy.orm import Session

    from runner.report.reader import load_campaign
    from runner.store import campaigns as crud

    driver_or_skip("lftp")
    spec = parse_spec({"name": "c", "repeats": 1, "warmup": False, "driver": "lftp", "pinning": {},
                       "servers": [{"name": "pyftpdlib"}],
                       "workloads": [{"name": "retr_concurrent", "params": {
                           "clients": 2, "file_size": 4096, "client_options": {"xfer:buffer-size": "0x20000"}}}]})
    proc, port = start_pyftpd(tmp_path)
    try:
        with Session(engine) as s:
            camp = crud.create_campaign(s, spec=spec, backend="local")
            s.commit()
            cell = crud.claim_next_cell(s, campaign_id=camp.id)
            assert "client_options=xfer:buffer-size=0x20000" in cell.params_key
            out = run_local_cell(cell, spec, _backend(tmp_path, port, PASSWORD))
            assert out.status == "done", out.error
            crud.finish_cell(s, cell=cell, status=out.status, samples=out.samples)
            data = load_campaign(s, campaign_id=camp.id)
    finally:
        stop(proc)
    metrics = {x.metric: x for x in data.series}
    assert {"client_max_rss_max", "client_max_rss_median", "client_page_faults_minor"} <= set(metrics), metrics
    assert metrics["client_max_rss_max"].unit == "bytes" and metrics["client_max_rss_max"].samples[0] > 1 << 20
    assert all(x.title == "2 concurrent clients (RETR 4K file) [xfer:buffer-size=0x20000]"
               for x in data.series if x.workload == "retr_concurrent")


def test_campaign_with_a_workload_naming_its_own_driver(engine):
    """Seed 004's shape: wget beside xferlab's own client in one campaign (tpd, local
    backend). Each cell's environment records the driver that made its load; the report
    has one real-client table per benchmark, rusage only where real clients ran."""
    from sqlalchemy.orm import Session

    from runner.report.clients import client_tables
    from runner.report.reader import load_campaign
    from runner.store.models import Environment

    driver_or_skip("wget")
    local_server_or_skip("tpd")
    small = {"clients": 4, "file_size": "64K", "op_timeout": 20, "phase_timeout": 60}
    spec = parse_spec({"name": "two-drivers", "repeats": 1, "backend": "local", "pinning": {},
                       "servers": [{"name": "tpd"}],
                       "workloads": [{"name": "retr_concurrent", "params": {**small, "driver": "wget"}},
                                     {"name": "retr_concurrent", "params": small}]})
    cid, cells = _run_campaign(engine, spec, 2)
    assert [c.status for c in cells] == ["done", "done"], [c.error for c in cells]
    with Session(engine) as s:
        drivers = [s.get(Environment, c.environment_id).data["driver"]["name"] for c in cells]
        assert drivers == ["wget", "xferlab-ftp"]
        assert "driver=wget" in cells[0].params_key and "driver" not in cells[1].params_key
        data = load_campaign(s, campaign_id=cid)
    assert [d["name"] for d in data.environment["drivers"]] == ["wget", "xferlab-ftp"]
    tables = client_tables(data)
    assert [t.title for t in tables] == ["Real clients: 4 concurrent clients (RETR 64K file) [wget]",
                                         "Real clients: 4 concurrent clients (RETR 64K file)"]
    wget, own = tables[0].records[0], tables[1].records[0]
    assert wget["max_rss"] > 1 << 20 and wget["minflt"] > 0 and wget["rate_min"] > 0
    assert own["max_rss"] is None and own["median"] > 0


def test_campaign_keeps_going_past_missing_and_hung_clients(engine, monkeypatch):
    """The real clients' failure cases in one campaign (tpd, local backend): a workload whose
    client program is missing is skipped with the install hint; lftp held at 1000 B/s
    (``net:limit-rate``) past a 3 s bound is killed and its cell fails naming the client;
    the next workload's cell is done; no lftp process is left."""
    import psutil

    from runner.load.registry import get_driver

    driver_or_skip("lftp")
    local_server_or_skip("tpd")
    monkeypatch.setattr(get_driver("wget"), "binary", "wget-not-installed-xferlab")
    small = {"clients": 3, "file_size": "64K", "op_timeout": 20, "phase_timeout": 3}
    spec = parse_spec({"name": "client-failures", "repeats": 1, "backend": "local", "pinning": {}, "warmup": False,
                       "servers": [{"name": "tpd"}],
                       "workloads": [{"name": "retr_concurrent", "params": {**small, "driver": "wget"}},
                                     {"name": "retr_concurrent", "params": {
                                         **small, "driver": "lftp", "client_options": {"net:limit-rate": "1000"}}},
                                     {"name": "retr_concurrent", "params": small}]})
    _, cells = _run_campaign(engine, spec, 3)
    assert [c.status for c in cells] == ["skipped", "failed", "done"], [c.error for c in cells]
    assert "wget-not-installed-xferlab: binary not found in PATH; apt-get install wget" in cells[0].error
    assert "timeout" in cells[1].error and "lftp client" in cells[1].error, cells[1].error
    # this test's clients, not another test's lftp: the only ones held at 1000 B/s
    assert not [p for p in psutil.process_iter(["name", "cmdline"])
                if p.info["name"] == "lftp" and "net:limit-rate 1000" in " ".join(p.info["cmdline"] or ())]


def _run_campaign(engine, spec, n: int) -> tuple[int, list[Cell]]:
    """Store ``spec`` as a campaign, run it here (runner.campaign.loop.run_campaign), assert it
    ran ``n`` cells; ``(campaign id, its cells in spec order)``."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from runner.campaign.loop import run_campaign
    from runner.store import campaigns as crud

    with Session(engine) as s:
        cid = crud.create_campaign(s, spec=spec, backend="local").id
        s.commit()
    assert run_campaign(engine, cid) == n
    with Session(engine, expire_on_commit=False) as s:
        return cid, list(s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.seq)))
