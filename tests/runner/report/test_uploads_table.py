"""Seed 002's upload table (runner.report.uploads) on plain data: rows per server with
its disk and tmpfs figures side by side, medians, best of the repeats, ratio, failure
counters; skipped servers keep a row with the reason; the exports carry it."""
from __future__ import annotations

from runner.report import md, rst
from runner.report.data import CampaignData, Series
from runner.report.render import render_tables
from runner.report.uploads import split_label, upload_table, upload_tables


def _s(server: str, metric: str, values: tuple[float, ...], unit: str = "req/s") -> Series:
    return Series(server, "http_upload", "500 HTTP clients (upload 8K body)", metric, unit, True, values, "k")


def _data() -> CampaignData:
    series = [_s("go-http [storage=disk]", "requests_rate", (100.0, 120.0, 110.0)),
              _s("go-http [storage=tmpfs]", "requests_rate", (200.0, 240.0, 220.0)),
              _s("go-http [storage=disk]", "http_requests_network_failed", (1.0, 0.0, 2.0), "count"),
              _s("go-http [storage=tmpfs]", "http_requests_non_2xx", (0.0, 4.0, 0.0), "count"),
              _s("go-http [storage=tmpfs]", "http_requests_network_failed", (0.0, 0.0, 0.0), "count")]
    servers = ["go-http [storage=disk]", "go-http [storage=tmpfs]", "netty [storage=disk]", "netty [storage=tmpfs]"]
    failures = [("netty [storage=disk]", "http_upload", 0, "skipped: netty: no java here"),
                ("netty [storage=tmpfs]", "http_upload", 0, "skipped: netty: no java here")]
    return CampaignData(7, "seed002", servers, series, failures=failures)


def test_split_label():
    assert split_label("go-http [storage=tmpfs]") == ("go-http", "tmpfs")
    assert split_label("node-http [storage=disk,workers=4]") == ("node-http [workers=4]", "disk")
    assert split_label("tpd") == ("tpd", "disk")


def test_table_rows_and_records():
    t = upload_table(_data(), "k")
    assert [c.key for c in t.columns] == ["server", "disk", "tmpfs", "ratio", "network_failed", "non_2xx",
                                          "disk_best", "tmpfs_best", "note"]
    assert [c.text for c in t.rows[0].cells] == ["go-http", "110.00 req/s", "220.00 req/s", "2.00x", "3", "4",
                                                 "120.00 req/s", "240.00 req/s", ""]
    assert [c.text for c in t.rows[1].cells][:4] == ["netty", "n/a", "n/a", "n/a"]
    assert t.rows[1].cells[-1].text == "netty: no java here"
    assert t.records[0] == {"server": "go-http", "disk_median": 110.0, "disk_best": 120.0, "disk_n": 3,
                            "tmpfs_median": 220.0, "tmpfs_best": 240.0, "tmpfs_n": 3, "ratio": 2.0,
                            "network_failed": 3, "non_2xx": 4, "note": ""}


def test_exports_carry_it():
    tables = upload_tables(_data())
    assert len(tables) == 1 and tables[0].kind == "uploads"
    assert "| go-http  |" in rst.render(tables) or "go-http" in rst.render(tables)
    assert "220.00 req/s" in md.render(tables)
    csv_text = render_tables(tables, "csv")
    assert csv_text.splitlines()[0].startswith("server,disk_median,disk_best")
    assert '"kind": "uploads"' in render_tables(tables, "json")
    assert upload_tables(CampaignData(1, "ftp", ["tpd"], [])) == []
