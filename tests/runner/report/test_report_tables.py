"""Table models: ordering, marks, missing data, failures, memory checkpoints."""
from __future__ import annotations

import pytest

from runner.report import md, tables
from runner.report.data import CampaignData, Series
from tests.runner.report.fixtures import LOGIN, MEM, A, B, campaign


def test_comparison_rows_in_suite_order_with_marks():
    t = tables.comparison_table(campaign(), A, B)
    assert [r.key for r in t.rows] == ["stor", "retr", "login", "geomean"]
    assert [c.header for c in t.columns] == ["benchmark type", A, B, "ratio"]
    stor, retr, login, _ = t.rows
    assert [c.mark for c in stor.cells] == ["", "win", "", "loss"]
    assert [c.mark for c in retr.cells] == ["", "", "win", "win"]
    assert [c.mark for c in login.cells] == ["", "", "", ""]
    assert t.rows[-1].cells[3].text == "1.00x slower"
    assert t.title == f"{A} vs. {B}"
    assert len(t.oneliners()) == 3


def test_comparison_missing_side_unknown_server_and_same_server():
    d = campaign()
    d.series.append(Series(A, "quit", "300 concurrent clients (QUIT)", "elapsed", "s", False,
                           (0.02, 0.03, 0.02, 0.02, 0.03)))
    t = tables.comparison_table(d, A, B, speedup=True)
    quit_row = next(r for r in t.rows if r.key == "quit")
    assert [c.text for c in quit_row.cells] == [
        "300 concurrent clients (QUIT)", "0.0200 s", "n/a", "n/a", "n/a"]
    assert quit_row.comparison is None
    assert [r.key for r in t.rows][-2:] == ["quit", "geomean"]
    with pytest.raises(ValueError, match="unknown server.*'nope'"):
        tables.comparison_table(d, A, "nope")
    with pytest.raises(ValueError, match="both"):
        tables.comparison_table(d, A, A)


def test_comparison_params_key_rows_and_metric_override():
    d = CampaignData(1, "p", ["x", "y"], [
        Series(s, "login", f"{n} concurrent clients (connect, login)", "elapsed", "s", False,
               tuple(v * k for v in (1, 1.1, 0.9, 1.05, 0.95)), params_key=f"clients={n}")
        for s, k in (("x", 1.0), ("y", 2.0)) for n in (300, 1000)
    ] + [Series(s, "login", "300 concurrent clients (connect, login)", "ops_rate", "1/s", True,
                (100.0 * k,) * 5, params_key="clients=300") for s, k in (("x", 1.0), ("y", 0.5))])
    t = tables.comparison_table(d, "x", "y", geomean=False)
    assert [r.key for r in t.rows] == ["login[clients=300]", "login[clients=1000]"]
    assert [r.cells[3].text for r in t.rows] == ["2.00x slower", "2.00x slower"]
    t2 = tables.comparison_table(d, "x", "y", metric="ops_rate")
    assert [r.key for r in t2.rows] == ["login[clients=300]", "geomean"]
    assert [c.text for c in t2.rows[0].cells[1:]] == ["100.00 1/s", "50.00 1/s", "2.00x slower"]


def test_memory_table_start_pooled_and_checkpoint():
    d = campaign()
    t = tables.memory_table(d)
    assert [r.cells[0].text for r in t.rows] == [
        "Starting with", "STOR (client -> server)", "RETR (server -> client)", LOGIN]
    assert t.caption.startswith("Values on UNIX are calculated as (rss - shared)")
    # only one server: no bold (nothing to compare)
    single = tables.memory_table(d, [B])
    assert all(c.mark == "" for r in single.rows for c in r.cells)
    # no "end" checkpoint recorded: only the start row
    assert [r.key for r in tables.memory_table(d, checkpoint="end").rows] == ["start"]
    # a server without memory samples prints n/a
    d.series = [s for s in d.series if not (s.server == A and s.metric == MEM)]
    t = tables.memory_table(d)
    assert [c.text for c in t.rows[0].cells] == ["Starting with", "n/a", "6.7M"]
    assert all(c.mark == "" for r in t.rows for c in r.cells)
    assert t.records[0] == {"row": "start", "title": "Starting with", "metric": MEM,
                            "checkpoint": "start", "server": A, "n": None, "median": None,
                            "ci_low": None, "ci_high": None, "ci_coverage": None,
                            "mean": None, "stdev": None, "min": None, "max": None}


def test_campaign_table_keeps_failed_and_skipped():
    d = campaign()
    d.servers.append("proftpd 1.3.8")
    d.failures.append(("proftpd 1.3.8", "retr", 1, "skipped: proftpd binary not found"))
    t = tables.campaign_table(d)
    skipped = [r for r in t.rows if r.cells[0].text == "proftpd 1.3.8"]
    assert [c.text for c in skipped[0].cells] == [
        "proftpd 1.3.8", "RETR (server -> client)", "n/a", "n/a", "0", "n/a", "1", "n/a"]
    stor_b = next(r for r in t.rows if r.key == f"{B}:stor")
    assert stor_b.cells[6].text == "1"  # failed cells
    assert t.records[2]["errors"] == 1 and t.records[2]["failed"] == 0
    # the store names the total "errors_total" (metric_stat)
    d.series = [Series(s.server, s.workload, s.title, "errors_total", s.unit, s.higher_is_better,
                       s.samples) if s.metric == "errors" else s for s in d.series]
    assert tables.campaign_table(d).records[2]["errors"] == 1


def test_single_samples_and_empty_series_do_not_crash():
    d = CampaignData(1, "one", ["x", "y"], [
        Series("x", "retr", "RETR (server -> client)", "throughput", "MiB/s", True, (10.0,)),
        Series("y", "retr", "RETR (server -> client)", "throughput", "MiB/s", True, (20.0,)),
        Series("y", "stor", "STOR (client -> server)", "throughput", "MiB/s", True, ()),
    ])
    t = tables.comparison_table(d, "x", "y", ci=True, speedup=True)
    assert [c.text for c in t.rows[0].cells] == [
        "RETR (server -> client)", "10.00 MiB/s", "20.00 MiB/s", "not significant", "+1.00x"]
    assert [c.text for c in tables.campaign_table(d).rows[0].cells][2:5] == ["10.00 MiB/s", "n/a", "1"]
    assert md.render(d)  # the default report renders


def test_report_tables_default():
    ts = tables.report_tables(campaign())
    assert [t.kind for t in ts] == ["campaign", "comparison", "memory"]
    assert ts[1].title == f"{A} vs. {B}"
    assert tables.report_tables(CampaignData(1, "empty", [], [])) == [
        tables.campaign_table(CampaignData(1, "empty", [], []))]


def test_campaign_table_flags_client_bound():
    t = tables.campaign_table(campaign())
    retr_a = next(r for r in t.rows if r.key == f"{A}:retr")
    retr_b = next(r for r in t.rows if r.key == f"{B}:retr")
    assert (retr_a.cells[7].text, retr_a.cells[7].mark) == ("95% client-bound", "loss")
    assert (retr_b.cells[7].text, retr_b.cells[7].mark) == ("40%", "")
    assert next(r for r in t.records if r["server"] == A and r["workload"] == "retr")[
        "client_cpu_utilization"] == 0.95
