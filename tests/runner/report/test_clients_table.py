"""The real-client tables of seeds 003 and 004 (runner.report.clients) on plain data: one
table per benchmark, a row per server with its figure, the ratio to the best row, the
per-client spread and the clients' rusage; an own-driver benchmark of the same workload
gets its table with n/a for the rusage; the exports and the text renderer carry labels
and titles with brackets verbatim."""
from __future__ import annotations

from runner.report import md, rst
from runner.report.clients import client_table, client_tables
from runner.report.data import CampaignData, Series, WorkloadFacts
from runner.report.render import render_tables

WGET = "512 concurrent clients (RETR 1M file) [wget]"
OWN = "512 concurrent clients (RETR 1M file)"


def _s(server: str, title: str, key: str, metric: str, values: tuple[float, ...], unit: str = "s") -> Series:
    return Series(server, "retr_concurrent", title, metric, unit, False, values, key)


def _data() -> CampaignData:
    series = []
    for server, times, jain, rss in (("tpd", (40.0, 44.0, 42.0), 0.99, 5.3e6),
                                     ("vsftpd [link=100mbit]", (50.0, 52.0, 51.0), 0.41, 5.4e6)):
        series += [_s(server, WGET, "w", "elapsed", times),
                   _s(server, WGET, "w", "fairness_jain", (jain,) * 3, "ratio"),
                   _s(server, WGET, "w", "fairness_min_rate", (0.02, 0.03, 0.025), "MiB/s"),
                   _s(server, WGET, "w", "fairness_p50_rate", (0.2, 0.2, 0.2), "MiB/s"),
                   _s(server, WGET, "w", "fairness_max_rate", (9.0, 8.0, 10.0), "MiB/s"),
                   _s(server, WGET, "w", "client_cpu_user", (1.5, 1.7, 1.6)),
                   _s(server, WGET, "w", "client_cpu_system", (3.0, 3.2, 3.1)),
                   _s(server, WGET, "w", "client_cpu_utilization", (0.95, 0.91, 0.97), "ratio"),
                   _s(server, WGET, "w", "client_max_rss_max", (rss, rss - 1e5, rss + 1e5), "bytes"),
                   _s(server, WGET, "w", "client_page_faults_minor", (160000.0, 162000.0, 161000.0), "count")]
    series += [_s("tpd", OWN, "o", "elapsed", (10.0, 11.0)), _s("vsftpd [link=100mbit]", OWN, "o", "elapsed", (8.0,))]
    facts = {"retr_concurrent": WorkloadFacts(OWN, "elapsed", "s", False)}
    return CampaignData(4, "seed004", ["tpd", "vsftpd [link=100mbit]"], series, workloads=facts)


def test_one_table_per_benchmark_with_rusage_and_spread():
    tables = client_tables(_data())
    assert [t.title for t in tables] == [f"Real clients: {WGET}", f"Real clients: {OWN}"]
    t = tables[0]
    assert [c.key for c in t.columns] == ["server", "median", "n", "vs_best", "jain", "rate_min", "rate_p50",
                                          "rate_max", "cpu_user", "cpu_sys", "client_cpu", "max_rss", "minflt"]
    assert [c.text for c in t.rows[0].cells] == ["tpd", "42.00 s", "3", "1.00x", "0.99", "0.0250", "0.200",
                                                 "9.00", "1.60 s", "3.10 s", "95% client-bound", "5.1M", "161,000"]
    assert t.rows[0].cells[3].mark == "win" and t.rows[1].cells[3].mark == ""
    row = [c.text for c in t.rows[1].cells]
    assert row[:5] == ["vsftpd [link=100mbit]", "51.00 s", "3", "1.21x", "0.41"]
    assert t.records[1]["max_rss"] == 5.5e6  # the largest of any repeat, not the median
    own = tables[1]  # xferlab's own driver: no rusage, its best is its own
    assert [c.text for c in own.rows[0].cells][:5] == ["tpd", "10.50 s", "2", "1.31x", "n/a"]
    assert [c.text for c in own.rows[1].cells][-4:] == ["n/a", "n/a", "n/a", "n/a"]


def test_no_real_client_cell_no_table():
    d = _data()
    d.series = [s for s in d.series if s.metric != "client_max_rss_max"]
    assert client_tables(d) == []


def test_exports_keep_brackets():
    t = client_table(_data(), "retr_concurrent", "w")
    text = render_tables([t], "text", width=200)
    assert f"Real clients: {WGET}" in text and "vsftpd [link=100mbit]" in text
    assert "vsftpd [link=100mbit]" in rst.render([t]) and WGET in md.render([t])


def test_a_server_that_failed_keeps_its_row_with_the_reason():
    d = _data()
    d.servers.append("proftpd")
    d.failures = [("proftpd", "retr_concurrent", 0, "52 failed operations (timeout=52): first timeout error")]
    t = client_tables(d)[1]
    assert t.columns[-1].key == "note"
    assert [c.text for c in t.rows[2].cells][:5] == ["proftpd", "n/a", "0", "n/a", "n/a"]
    assert t.rows[2].cells[-1].text.startswith("52 failed operations") and t.records[0]["note"] == ""
