"""Fairness in the reports: the campaign table's ``Jain`` column in every export, the
A-vs-B fairness table of a comparison, and the CV of cells stored before it was (derived
from their Jain's index when the campaign is read back)."""
from __future__ import annotations

import csv as stdcsv
import io
import json as stdjson
import math
from dataclasses import replace

import docutils.nodes
import pytest
from sqlalchemy.orm import Session

from runner.report import csv, html, json, md, rst, tables, text
from runner.report.data import Series
from tests.runner.report.fixtures import LOGIN, A, B, campaign
from tests.runner.report.test_report_exports import assert_docutils_clean

#: Jain's index per repeat of the 300-client login row: A unfair (seed 004's vsftpd), B fair.
JAIN = {A: (0.40, 0.42, 0.38, 0.41, 0.44), B: (0.97, 0.99, 0.98, 0.98, 0.96)}


def _with_fairness(servers=(A, B)):
    data = campaign()
    extra = []
    for server in servers:
        extra.append(Series(server, "login", LOGIN, "fairness_jain", "ratio", True, JAIN[server]))
        extra.append(Series(server, "login", LOGIN, "fairness_cv", "ratio", False,
                            tuple(math.sqrt(1 / j - 1) for j in JAIN[server])))
    return replace(data, series=data.series + extra)


def test_campaign_table_has_a_narrow_jain_column():
    t = tables.campaign_table(_with_fairness())
    assert [c.header for c in t.columns][-1] == "Jain"
    col = [c.key for c in t.columns].index("fairness")
    by_row = {r.key: r.cells[col].text for r in t.rows}
    assert by_row[f"{A}:login"] == "0.41" and by_row[f"{B}:login"] == "0.98"
    assert by_row[f"{A}:retr"] == "n/a"  # a single-session row has no distribution
    rec = next(r for r in t.records if r["server"] == A and r["workload"] == "login")
    assert rec["fairness_jain"] == pytest.approx(0.41)
    assert rec["fairness_cv"] == pytest.approx(math.sqrt(1 / 0.41 - 1))
    assert next(r for r in t.records if r["workload"] == "retr")["fairness_jain"] is None


def test_no_column_without_fairness():
    t = tables.campaign_table(campaign())
    assert "fairness" not in [c.key for c in t.columns]
    assert "fairness_jain" not in t.records[0]


def test_every_export_carries_the_column():
    data = _with_fairness()
    t = tables.campaign_table(data)
    out = text.render(t, width=200)
    assert "Jain" in out and "0.41" in out and "0.98" in out
    r = rst.render(t, title=False)
    doctree = assert_docutils_clean(r)
    assert "Jain" in [n.astext() for n in doctree.findall(docutils.nodes.emphasis)]
    assert " 0.41 |" in r
    h = html.render(t)
    assert ">Jain</th>" in h and ">0.41</td>" in h
    m = md.render(t)
    assert "| Jain |" in m and " 0.98 |" in m
    # CSV and JSON of the table: the raw medians, unrounded
    rows = list(stdcsv.DictReader(io.StringIO(csv.render(t))))
    login_a = next(r for r in rows if r["server"] == A and r["workload"] == "login")
    assert float(login_a["fairness_jain"]) == pytest.approx(0.41) and float(login_a["fairness_cv"]) > 1
    doc = stdjson.loads(json.render(t))
    assert doc["tables"][0]["columns"][-1] == {"key": "fairness", "header": "Jain", "numeric": True}
    # CSV and JSON of the whole campaign: every sample of both fairness series
    rows = list(stdcsv.DictReader(io.StringIO(csv.render(data))))
    assert {r["metric"] for r in rows} >= {"fairness_jain", "fairness_cv"}
    doc = stdjson.loads(json.render(data))
    jain = next(s for s in doc["series"] if s["metric"] == "fairness_jain" and s["server"] == A)
    assert jain["samples"] == list(JAIN[A])


def test_fairness_comparison_a_vs_b():
    t = tables.fairness_comparison(_with_fairness(), A, B)
    assert t is not None and t.title.startswith("Fairness (Jain's index over the clients)")
    assert [r.key for r in t.rows] == ["login"]  # only rows with a distribution; no geometric mean
    cells = [c.text for c in t.rows[0].cells]
    assert cells[1].startswith("0.410") and cells[2].startswith("0.980")
    assert cells[3] == "2.39x higher"  # 0.98 / 0.41, significant (5 vs 5, no overlap)
    assert t.rows[0].cells[2].mark == "win" and t.rows[0].cells[3].mark == "win"
    assert t.oneliners() == [f"{LOGIN}: 0.410 +- 7% -> 0.980 +- 2%: 2.39x higher"]
    assert_docutils_clean(rst.render(t))
    assert tables.fairness_comparison(_with_fairness(servers=(A,)), A, B) is None


def test_stored_cv_and_cv_derived_for_an_old_cell(engine):
    """A cell stored with only ``jain`` (before the CV was stored) gets its CV derived,
    sqrt(1/J - 1); a new cell's stored CV is read as it is; the series keep cell order."""
    from runner.report.reader import load_campaign
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    spec = parse_spec({"name": "fair", "repeats": 2, "backend": "local",
                       "servers": [{"name": "pyftpdlib", "version": "2.2.0"}],
                       "workloads": [{"name": "retr_concurrent", "params": {"clients": 4}}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        cells = list(s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq))
        for c, fairness in zip(cells, ([("jain", 0.8)], [("cv", 0.125), ("jain", 0.9)])):
            samples = [Sample(metric="elapsed", stat="value", value=1.0, unit="s")]
            samples += [Sample(metric="fairness", stat=st, value=v, unit="ratio") for st, v in fairness]
            crud.finish_cell(s, cell=c, status="done", samples=samples)
        data = load_campaign(s, campaign_id=camp.id)
    cv = next(x for x in data.series if x.metric == "fairness_cv")
    assert cv.samples == pytest.approx((0.5, 0.125))  # sqrt(1/0.8 - 1) = 0.5; the stored one
    t = tables.campaign_table(data)
    assert t.records[0]["fairness_jain"] == pytest.approx(0.85)
    assert t.rows[0].cells[-1].text == "0.85"
