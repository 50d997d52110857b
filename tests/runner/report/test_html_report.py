"""The HTML report with charts (runner.report.charts, runner.report.html): the chart data
against figures computed by hand from the fixture's numbers, the embedded JSON read back
equal, hostile labels kept as data, the Content-Security-Policy hashes of its scripts, the
report without Chart.js, and the reader filling timelines and per-client curves from
stored rows. Chromium draws it in test_html_report_browser.py."""
from __future__ import annotations

import base64
import hashlib
import json
import re
import statistics
from html import unescape

import pytest
from sqlalchemy.orm import Session

from runner.report import charts, html
from runner.report.render import campaign_report
from tests.runner.report.chart_fixture import CONC, EVIL, LOGIN, RETR, SERVERS, chart_campaign, client_rates, jain

STUB = "/* Chart.js stand-in */"


@pytest.fixture
def chartjs_stub(tmp_path, monkeypatch):
    """XFERLAB_CHARTJS_PATH at a stand-in file; returns its text."""
    path = tmp_path / "chart.min.js"
    path.write_text(STUB)
    monkeypatch.setenv("XFERLAB_CHARTJS_PATH", str(path))
    return STUB


def _embedded(doc: str) -> dict:
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', doc, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_bars_are_medians_with_their_ci():
    """One chart per benchmark (the sweep's rows left to the saturation chart), one bar per
    server at the median of its repeats; with 3 repeats the CI of the median is [min, max]."""
    d = charts.chart_data(chart_campaign())
    assert [c["title"] for c in d["bars"]] == ["login (connect, login)", "RETR (server -> client)",
                                               "10 concurrent clients (RETR 1M file)"]
    for chart, figures in zip(d["bars"], (LOGIN, RETR, CONC)):
        assert [b["server"] for b in chart["bars"]] == SERVERS
        assert [b["median"] for b in chart["bars"]] == pytest.approx([statistics.median(figures[i]) for i in range(3)])
        assert [b["ci_low"] for b in chart["bars"]] == pytest.approx([min(figures[i]) for i in range(3)])
        assert [b["ci_high"] for b in chart["bars"]] == pytest.approx([max(figures[i]) for i in range(3)])
        assert {b["n"] for b in chart["bars"]} == {3}
    assert d["bars"][1]["higher_is_better"] is True and d["bars"][0]["higher_is_better"] is False


def test_ratios_are_times_better_than_the_reference():
    """RETR: 2x the throughput is 2x better; login: half the seconds is 2x better; the
    geometric mean of the rows last; 3 repeats against 3 cannot be significant (the smallest
    two-sided Mann-Whitney p is 0.1)."""
    d = charts.chart_data(chart_campaign())
    assert [(r["reference"], r["server"]) for r in d["ratios"]] == [(SERVERS[0], SERVERS[1]), (SERVERS[0], "tpd")]
    tpd = {r["title"]: r for r in d["ratios"][1]["rows"]}
    assert tpd["RETR (server -> client)"]["better"] == pytest.approx(400 / 110, rel=1e-5)
    assert tpd["login (connect, login)"]["better"] == pytest.approx(2.1 / 0.55, rel=1e-5)
    assert tpd["10 concurrent clients (RETR 1M file)"]["better"] == pytest.approx(4.2 / 2.1, rel=1e-5)
    assert d["ratios"][1]["geomean"] == pytest.approx(statistics.geometric_mean([r["better"] for r in tpd.values()]),
                                                      rel=1e-5)
    assert not any(r["significant"] for r in tpd.values())
    assert tpd["RETR (server -> client)"]["text"] == "3.64x faster, not significant"


def test_ratio_of_a_significant_difference():
    """5 repeats each, every B above every A: significant (p = 0.0079), 152 / 102 MiB/s, the
    table's words."""
    from runner.report.data import CampaignData, Series

    data = CampaignData(1, "x", ["a", "b"], [
        Series("a", "retr", "RETR", "throughput", "MiB/s", True, (100.0, 101.0, 102.0, 103.0, 104.0)),
        Series("b", "retr", "RETR", "throughput", "MiB/s", True, (150.0, 151.0, 152.0, 153.0, 154.0))])
    (row,) = charts.ratio_charts(data)[0]["rows"]
    assert row["significant"] and row["better"] == pytest.approx(152 / 102, rel=1e-5) and row["text"] == "1.49x faster"


def test_memory_fairness_and_saturation_data():
    """Timelines in MiB per server; Jain's index per server; per-client curves grouped per
    (server, benchmark), 3 repeats of 10 clients each; the sweep's curve with its knee."""
    d = charts.chart_data(chart_campaign())
    assert [m["server"] for m in d["memory"]] == SERVERS
    line = d["memory"][2]["lines"][0]
    assert line["title"] == "RETR (server -> client)" and len(line["points"]) == 20
    assert line["points"][0] == [0.0, 7.0] and line["points"][-1] == pytest.approx([1.9, 8.9])
    (j,) = d["fairness"]["jain"]
    assert [b["server"] for b in j["bars"]] == SERVERS
    assert [b["median"] for b in j["bars"]] == pytest.approx([jain(client_rates(i)) for i in range(3)], rel=1e-5)
    curves = d["fairness"]["curves"]
    assert [c["server"] for c in curves] == SERVERS and all(len(c["repeats"]) == 3 for c in curves)
    assert curves[1]["repeats"][0]["points"][:2] == [[1, 10.0], [2, 9.4]]
    (sat,) = d["saturation"]
    assert sat["server"] == "tpd" and [p["clients"] for p in sat["points"]] == [1, 2, 4, 8] and sat["knee"] == 4


def test_report_embeds_the_chart_data_and_hashes_its_scripts(chartjs_stub):
    """The JSON in the file reads back equal to chart_data; the hostile label never appears
    as markup (the data's ``</script>`` is written ``\\u003c/script\\u003e``); the CSP allows
    no request and exactly the two inlined scripts, by hash."""
    data = chart_campaign()
    doc = campaign_report(data, fmt="html")
    assert _embedded(doc) == charts.chart_data(data)
    assert EVIL not in doc and "<img" not in doc
    assert doc.count("<script") == 3 and doc.count("</script>") == 3
    scripts = re.findall(r"<script>(.*?)</script>", doc, re.S)
    assert scripts[0] == STUB and "xferlabWhiskers" in scripts[1]
    csp = unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', doc).group(1))
    hashes = ["'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'" for s in scripts]
    assert csp == f"default-src 'none'; script-src {' '.join(hashes)}; style-src 'unsafe-inline'; img-src data:"
    # context first, then the chart sections, then the other tables
    order = [doc.index(x) for x in ('<h2>Conducted on</h2>', 'id="bars"', 'id="ratios"', 'id="memory"',
                                    'id="fairness"', 'id="saturation"', 'id="tables"', "<h2>Memory usage</h2>")]
    assert order == sorted(order)


def test_report_without_chartjs_says_so(tmp_path, monkeypatch):
    """Chart.js unreadable: every table is still there, one script (ours, which draws nothing
    without Chart), and a note saying what to install."""
    monkeypatch.setenv("XFERLAB_CHARTJS_PATH", str(tmp_path / "absent.js"))
    doc = campaign_report(chart_campaign(), fmt="html")
    assert doc.count("<script>") == 1 and "exported without Chart.js (Debian package libjs-chart.js" in doc
    assert "<h2>Memory usage</h2>" in doc and "<h2>Conducted on</h2>" in doc


def test_chartjs_that_would_end_the_script_is_refused():
    with pytest.raises(ValueError, match="cannot be inlined"):
        html.render(chart_campaign(), charts={}, chartjs="x = '</SCRIPT><b>';")


def test_reader_fills_timelines_and_client_curves(engine):
    """Stored raws come back: the first done cell's memory timeline per (server, workload,
    parameters), thinned to 150 points (first and last kept), USS in bytes; every N-client
    cell's per-client rates, fastest first, with Jain's index over all its clients."""
    from runner.report.reader import MAX_TIMELINE_POINTS, load_campaign
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    mib = 1 << 20
    spec = parse_spec({"name": "raws", "repeats": 2, "backend": "local", "servers": [{"name": "tpd"}],
                       "workloads": [{"name": "retr_concurrent", "params": {"clients": 4, "file_size": "4M"}}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        for c in s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq):
            c.status, c.started_at = "running", crud.now()
            timeline = [[t * 0.01, 1e6 * (c.repeat + 1) + t, 0, 1] for t in range(1000)]
            clients = [[4 * mib, 1.0, True], [4 * mib, 2.0, True], [4 * mib, 4.0, True], [8 * mib, 8.0, True]]
            crud.finish_cell(s, cell=c, status="done", samples=[
                Sample(metric="elapsed", stat="value", value=8.0, unit="s"),
                Sample(metric="server_mem_uss", stat="peak", value=2e6, unit="bytes", raw=timeline),
                Sample(metric="fairness", stat="jain", value=64 / 88, unit="ratio", raw=clients)])
        data = load_campaign(s, campaign_id=camp.id)
    (t,) = data.timelines
    assert (t.server, t.workload, t.repeat, len(t.points)) == ("tpd", "retr_concurrent", 0, MAX_TIMELINE_POINTS)
    assert t.points[0] == (0.0, 1e6) and t.points[-1] == pytest.approx((9.99, 1e6 + 999))
    assert [c.repeat for c in data.client_curves] == [0, 1]
    curve = data.client_curves[0]
    assert curve.points == ((1, 4.0), (2, 2.0), (3, 1.0), (4, 1.0)) and curve.unit == "MiB/s"
    assert curve.jain == pytest.approx(64 / 88) and curve.clients == 4
