"""The CLI shows fairness: ``xferlab show ID`` (the campaign table's Jain column),
``xferlab compare A B`` (the fairness table), ``xferlab export ID --format csv`` (the
fairness series); a campaign stored through the store helpers in the test PostgreSQL,
its fairness rows made by runner.cell.samples as a run makes them."""
from __future__ import annotations

import csv
import io

from sqlalchemy.orm import Session

from tests.support.cli import run_cli

MIB = 1 << 20
FAIR, UNFAIR = "fair-server", "unfair-server"


def _store(engine) -> int:
    from runner.cell.samples import fairness_samples
    from runner.load.result import ClientFigures, PhaseResult
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    spec = parse_spec({"name": "fairness cli", "repeats": 4, "backend": "local",
                       "servers": [{"name": "pyftpdlib", "version": "2.2.0", "label": FAIR},
                                   {"name": "vsftpd", "label": UNFAIR}],
                       "workloads": [{"name": "retr_concurrent", "params": {"clients": 4, "file_size": "4M"}}]})
    clients = {FAIR: [ClientFigures(4 * MIB, 2.0)] * 4,  # every client 2 MiB/s: Jain 1
               # 4, 2, 1, 1 MiB/s: Jain 64 / 88 = 0.727
               UNFAIR: [ClientFigures(4 * MIB, 1.0), ClientFigures(4 * MIB, 2.0), ClientFigures(4 * MIB, 4.0),
                        ClientFigures(8 * MIB, 8.0)]}
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        for c in s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq):
            c.status, c.started_at = "running", crud.now()
            r = PhaseResult(workload="retr_concurrent", elapsed_s=8.0, bytes=16 * MIB, ops=4,
                            clients=clients[c.server_label])
            samples = [Sample(metric="elapsed", stat="value", value=8.0 + c.repeat / 10, unit="s")]
            crud.finish_cell(s, cell=c, status="done", samples=samples + fairness_samples(r, http=False))
        return camp.id


def test_show_compare_export_carry_fairness(engine, xferlab_env):
    cid = _store(engine)
    out = run_cli(["show", str(cid)], xferlab_env)
    head, rows = out.split("┃ Jain ┃", 1)[0], out.split("┃ Jain ┃", 1)[1]
    assert "client CPU" in head
    fair_row = next(line for line in rows.splitlines() if FAIR in line)
    unfair_row = next(line for line in rows.splitlines() if UNFAIR in line)
    assert fair_row.rstrip(" │").endswith("1.00") and unfair_row.rstrip(" │").endswith("0.73")

    out = run_cli(["compare", FAIR, UNFAIR, "--campaign", str(cid)], xferlab_env)
    assert f"Fairness (Jain's index over the clients): {FAIR} vs. {UNFAIR}" in out
    assert "4 concurrent clients (RETR 4M file): 1.00 +- 0% -> 0.727 +- 0%: 1.38x lower" in out

    out = run_cli(["export", str(cid), "--format", "csv"], xferlab_env)
    rows = {(r["server"], r["metric"]): r for r in csv.DictReader(io.StringIO(out))}
    assert float(rows[(UNFAIR, "fairness_jain")]["median"]) == 64 / 88
    assert abs(float(rows[(UNFAIR, "fairness_cv")]["median"]) - 1.5 ** 0.5 / 2) < 1e-12
    assert float(rows[(FAIR, "fairness_cv")]["median"]) == 0.0
