"""The dashboard's campaign page and its JSON export carry the per-operation and per-bucket
tables of a ``mixed`` cell: a real mixed phase against pyftpdlib on loopback, stored as a
run stores it (runner.cell.samples.phase_samples), read back through the page."""
from __future__ import annotations

from sqlalchemy.orm import Session

from runner.catalogue.workloads import WorkloadParams
from runner.cell.samples import phase_samples
from runner.load.ftp.workloads import run_workload_sync
from runner.load.target import Target
from runner.report.fmt import number
from runner.spec.model import parse_spec
from runner.store import campaigns as crud
from runner.store.models import Cell
from tests.support.pyftpd import PASSWORD, USER, start_pyftpd, stop

PARAMS = {"clients": 2, "duration": 1.0, "mix": {"retr": 2, "list": 1, "noop": 1}, "seed": 9,
          "sizes": {"kind": "buckets", "buckets": {"4KiB": 1, "64KiB": 1}}, "op_timeout": 10, "connect_timeout": 10}


def test_campaign_page_and_export_carry_the_mixed_tables(engine, client, tmp_path, monkeypatch):
    monkeypatch.setenv("XFERLAB_CACHE_DIR", str(tmp_path / "cache"))
    proc, port = start_pyftpd(tmp_path)
    try:
        r = run_workload_sync("mixed", Target(host="127.0.0.1", port=port, user=USER, password=PASSWORD,
                                              root=tmp_path), WorkloadParams(**PARAMS))
    finally:
        stop(proc)
    assert r.ops > 10 and not r.errors, (r.errors, r.notes)
    spec = parse_spec({"name": "mixed page", "repeats": 1, "backend": "local", "servers": [{"name": "pyftpdlib"}],
                       "workloads": [{"name": "mixed", "params": PARAMS}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        [cell] = s.query(Cell).filter(Cell.campaign_id == camp.id).all()
        cell.status, cell.started_at = "running", crud.now()
        crud.finish_cell(s, cell=cell, status="done", samples=phase_samples(r))
    page = client.get(f"/campaigns/{camp.id}/figures")
    assert page.status_code == 200
    assert "Mixed sessions: per operation" in page.text and "Mixed sessions: per size bucket" in page.text
    retr = r.op_figures["retr"]
    assert number(retr.ops / r.elapsed_s) in page.text  # the retr row's ops/s
    doc = client.get(f"/api/campaigns/{camp.id}/export", params={"format": "json"}).json()
    rows = {(m["group"], m["name"]): m for m in doc["mixed"]}
    assert rows[("op", "retr")]["ops"] == retr.ops and rows[("op", "list")]["ops"] == r.op_figures["list"].ops
    assert sum(m["ops"] for (g, _), m in rows.items() if g == "bucket") == retr.ops
    assert {n for g, n in rows if g == "bucket"} == {"4K", "64K"}
