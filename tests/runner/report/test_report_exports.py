"""Exports on the hand-made campaign: exact expected output, docutils-clean RST,
parseable HTML with colours, CSV raw values, JSON round trip."""
from __future__ import annotations

import csv as stdcsv
import io
import json as stdjson
from html.parser import HTMLParser

import docutils.core
import docutils.nodes
import pytest

from runner.report import csv, html, json, md, rst, tables, text
from runner.report.data import CampaignData, Series
from tests.runner.report.fixtures import A, B, campaign

RST_COMPARISON = """\
vsftpd 3.0.3 vs. pyftpdlib 2.2.0
--------------------------------

+-----------------------------------------+------------------------+-------------------------+------------------+------------+
| *benchmark type*                        | *vsftpd 3.0.3*         | *pyftpdlib 2.2.0*       | *ratio*          | *speedup*  |
+=========================================+========================+=========================+==================+============+
| STOR (client -> server)                 | **605.10 MiB/s +- 1%** |      580.30 MiB/s +- 3% | 1.04x slower     | -0.04x     |
+-----------------------------------------+------------------------+-------------------------+------------------+------------+
| RETR (server -> client)                 |    1524.05 MiB/s +- 2% | **1652.72 MiB/s +- 1%** | **1.08x faster** | **+0.08x** |
+-----------------------------------------+------------------------+-------------------------+------------------+------------+
| 300 concurrent clients (connect, login) |         0.200 s +- 10% |          0.210 s +- 12% | not significant  | -0.05x     |
+-----------------------------------------+------------------------+-------------------------+------------------+------------+
| Geometric mean                          |                        |                         | 1.00x slower     | 0.00x      |
+-----------------------------------------+------------------------+-------------------------+------------------+------------+
"""

RST_MEMORY = """\
Memory usage
------------

*Values on UNIX are calculated as (rss - shared); peak of each workload, median of the repeats.*

+-----------------------------------------+----------------+-------------------+
| *benchmark type*                        | *vsftpd 3.0.3* | *pyftpdlib 2.2.0* |
+=========================================+================+===================+
| Starting with                           |     **352.0K** |              6.7M |
+-----------------------------------------+----------------+-------------------+
| STOR (client -> server)                 |     **816.0K** |              6.8M |
+-----------------------------------------+----------------+-------------------+
| RETR (server -> client)                 |     **820.0K** |              6.8M |
+-----------------------------------------+----------------+-------------------+
| 300 concurrent clients (connect, login) |         140.9M |          **8.8M** |
+-----------------------------------------+----------------+-------------------+
"""

RST_CAMPAIGN = """\
+-----------------+-----------------------------------------+---------------+--------------------------+-----+----------+----------+------------------+
| *server*        | *benchmark type*                        | *median*      | *95% CI*                 | *n* | *errors* | *failed* | *client CPU*     |
+=================+=========================================+===============+==========================+=====+==========+==========+==================+
| vsftpd 3.0.3    | STOR (client -> server)                 |  605.10 MiB/s |   [598.70, 615.00] MiB/s |   5 |      n/a |        0 |              n/a |
+-----------------+-----------------------------------------+---------------+--------------------------+-----+----------+----------+------------------+
| vsftpd 3.0.3    | RETR (server -> client)                 | 1524.05 MiB/s | [1498.70, 1545.00] MiB/s |   5 |      n/a |        0 | 95% client-bound |
+-----------------+-----------------------------------------+---------------+--------------------------+-----+----------+----------+------------------+
| vsftpd 3.0.3    | 300 concurrent clients (connect, login) |       0.200 s |         [0.180, 0.220] s |   5 |        1 |        0 |              n/a |
+-----------------+-----------------------------------------+---------------+--------------------------+-----+----------+----------+------------------+
| pyftpdlib 2.2.0 | STOR (client -> server)                 |  580.30 MiB/s |   [560.20, 590.80] MiB/s |   5 |      n/a |        1 |              n/a |
+-----------------+-----------------------------------------+---------------+--------------------------+-----+----------+----------+------------------+
| pyftpdlib 2.2.0 | RETR (server -> client)                 | 1652.72 MiB/s | [1630.10, 1671.30] MiB/s |   5 |      n/a |        0 |              40% |
+-----------------+-----------------------------------------+---------------+--------------------------+-----+----------+----------+------------------+
| pyftpdlib 2.2.0 | 300 concurrent clients (connect, login) |       0.210 s |         [0.180, 0.230] s |   5 |        0 |        0 |              n/a |
+-----------------+-----------------------------------------+---------------+--------------------------+-----+----------+----------+------------------+
"""

MD_COMPARISON = """\
## vsftpd 3.0.3 vs. pyftpdlib 2.2.0

| benchmark type                          |     vsftpd 3.0.3 |   pyftpdlib 2.2.0 | ratio            |
| :-------------------------------------- | ---------------: | ----------------: | :--------------- |
| STOR (client -> server)                 | **605.10 MiB/s** |      580.30 MiB/s | 1.04x slower     |
| RETR (server -> client)                 |    1524.05 MiB/s | **1652.72 MiB/s** | **1.08x faster** |
| 300 concurrent clients (connect, login) |          0.200 s |           0.210 s | not significant  |
| Geometric mean                          |                  |                   | 1.00x slower     |
"""

MD_MEMORY = """\
## Memory usage

_Values on UNIX are calculated as (rss - shared); peak of each workload, median of the repeats._

| benchmark type                          | vsftpd 3.0.3 | pyftpdlib 2.2.0 |
| :-------------------------------------- | -----------: | --------------: |
| Starting with                           |   **352.0K** |            6.7M |
| STOR (client -> server)                 |   **816.0K** |            6.8M |
| RETR (server -> client)                 |   **820.0K** |            6.8M |
| 300 concurrent clients (connect, login) |       140.9M |        **8.8M** |
"""

HTML_FRAGMENT = """\
<div class="xferlab-report">
<section class="xferlab-table xferlab-comparison">
<h2>vsftpd 3.0.3 vs. pyftpdlib 2.2.0</h2>
<table>
<thead><tr><th>benchmark type</th><th class="num">vsftpd 3.0.3</th><th class="num">pyftpdlib 2.2.0</th><th>ratio</th><th>speedup</th></tr></thead>
<tbody>
<tr><td>STOR (client -&gt; server)</td><td class="num win" style="color: green; font-weight: bold">605.10 MiB/s</td><td class="num">580.30 MiB/s</td><td class="loss" style="color: red">1.04x slower</td><td class="loss" style="color: red">-0.04x</td></tr>
<tr><td>RETR (server -&gt; client)</td><td class="num">1524.05 MiB/s</td><td class="num win" style="color: green; font-weight: bold">1652.72 MiB/s</td><td class="win" style="color: green; font-weight: bold">1.08x faster</td><td class="win" style="color: green; font-weight: bold">+0.08x</td></tr>
<tr><td>300 concurrent clients (connect, login)</td><td class="num">0.200 s</td><td class="num">0.210 s</td><td>not significant</td><td>-0.05x</td></tr>
<tr><td>Geometric mean</td><td class="num"></td><td class="num"></td><td>1.00x slower</td><td>0.00x</td></tr>
</tbody>
</table>
</section>
</div>
"""

CSV_COMPARISON = """\
server_a,server_b,workload,params_key,title,metric,unit,higher_is_better,a_n,a_median,a_ci_low,a_ci_high,a_ci_coverage,a_mean,a_stdev,a_min,a_max,b_n,b_median,b_ci_low,b_ci_high,b_ci_coverage,b_mean,b_stdev,b_min,b_max,norm,slowdown,speedup,p_value,significant
vsftpd 3.0.3,pyftpdlib 2.2.0,stor,,STOR (client -> server),throughput,MiB/s,True,5,605.1,598.7,615.0,0.9375,605.898,6.7647631148474,598.7,615.0,5,580.3,560.2,590.8,0.9375,577.52,12.298251908299783,560.2,590.8,0.9590150388365558,1.0427365155953818,-0.04098496116344419,0.007936507936507936,True
vsftpd 3.0.3,pyftpdlib 2.2.0,retr,,RETR (server -> client),throughput,MiB/s,True,5,1524.05,1498.7,1545.0,0.9375,1521.77,17.98803769175503,1498.7,1545.0,5,1652.72,1630.1,1671.3,0.9375,1650.9239999999998,16.302450122604288,1630.1,1671.3,1.084426363964437,0.9221465220969068,0.08442636396443692,0.007936507936507936,True
vsftpd 3.0.3,pyftpdlib 2.2.0,login,,"300 concurrent clients (connect, login)",elapsed,s,False,5,0.2,0.18,0.22,0.9375,0.2,0.0158113883008419,0.18,0.22,5,0.21,0.18,0.23,0.9375,0.20800000000000002,0.01923538406167135,0.18,0.23,1.0499999999999998,1.0499999999999998,-0.04761904761904745,0.5555555555555556,False
vsftpd 3.0.3,pyftpdlib 2.2.0,geomean,,Geometric mean,,,,,,,,,,,,,,,,,,,,,,,1.0032009575667524,-0.0031907441301853856,,
"""

JSON_TINY = """\
{
  "format": "xferlab-results",
  "version": 1,
  "campaign": {
    "id": 3,
    "name": "tiny",
    "servers": [
      "s1"
    ],
    "environment": {
      "cores": 2
    },
    "failures": [
      {
        "server": "s1",
        "workload": "stor",
        "repeat": 1,
        "error": "421 Timeout"
      }
    ]
  },
  "series": [
    {
      "server": "s1",
      "workload": "retr",
      "title": "RETR (server -> client)",
      "metric": "throughput",
      "unit": "MiB/s",
      "higher_is_better": true,
      "params_key": "",
      "checkpoint": null,
      "samples": [
        1.5,
        2.5,
        2.0
      ],
      "summary": {
        "n": 3,
        "median": 2.0,
        "ci_low": 1.5,
        "ci_high": 2.5,
        "ci_coverage": 0.75,
        "mean": 2.0,
        "stdev": 0.5,
        "min": 1.5,
        "max": 2.5,
        "rel_ci": 0.25
      }
    }
  ]
}
"""

ONELINERS = """\
STOR (client -> server): 605.1 MiB/s +- 1% -> 580.3 MiB/s +- 3%: 1.04x slower
RETR (server -> client): 1524.0 MiB/s +- 2% -> 1652.7 MiB/s +- 1%: 1.08x faster
300 concurrent clients (connect, login): 0.200 s +- 10% -> 0.210 s +- 12%: not significant
"""


@pytest.fixture
def data() -> CampaignData:
    return campaign()


def tiny() -> CampaignData:
    return CampaignData(
        campaign_id=3, name="tiny", servers=["s1"],
        series=[Series("s1", "retr", "RETR (server -> client)", "throughput", "MiB/s", True,
                       (1.5, 2.5, 2.0))],
        environment={"cores": 2}, failures=[("s1", "stor", 1, "421 Timeout")])


# -- RST --------------------------------------------------------------------

def assert_docutils_clean(source: str) -> docutils.nodes.document:
    """Parse with docutils; any warning (level 2) or worse raises, and nothing is reported."""
    stream = io.StringIO()
    doctree = docutils.core.publish_doctree(source, settings_overrides={
        "report_level": 2, "halt_level": 2, "warning_stream": stream})
    assert stream.getvalue() == ""
    assert not list(doctree.findall(docutils.nodes.system_message))
    return doctree


def test_rst_comparison_exact(data):
    out = rst.render(tables.comparison_table(data, A, B, ci=True, speedup=True))
    assert out == RST_COMPARISON
    doctree = assert_docutils_clean(out)
    assert len(list(doctree.findall(docutils.nodes.table))) == 1
    strong = [n.astext() for n in doctree.findall(docutils.nodes.strong)]
    assert strong == ["605.10 MiB/s +- 1%", "1652.72 MiB/s +- 1%", "1.08x faster", "+0.08x"]
    headers = [n.astext() for n in doctree.findall(docutils.nodes.emphasis)]
    assert headers == ["benchmark type", A, B, "ratio", "speedup"]


def test_rst_memory_and_campaign_exact(data):
    assert rst.render(tables.memory_table(data)) == RST_MEMORY
    assert rst.render(tables.campaign_table(data), title=False) == RST_CAMPAIGN
    assert_docutils_clean(RST_MEMORY)
    assert_docutils_clean(RST_CAMPAIGN)


def test_rst_full_report_docutils_clean(data):
    out = rst.render(data)  # campaign, comparison, memory
    doctree = assert_docutils_clean(out)
    assert len(list(doctree.findall(docutils.nodes.table))) == 3


def test_rst_escapes_hostile_text():
    nasty = "a*b_ |x| `c` \\ end_"
    d = CampaignData(1, "x", [nasty, "- 1. b"], [
        Series(nasty, "stor", "- list? 1. *bold*", "throughput", "MiB/s", True, (1, 2, 3, 4, 5)),
        Series("- 1. b", "stor", "- list? 1. *bold*", "throughput", "MiB/s", True, (6, 7, 8, 9, 10)),
    ])
    out = rst.render([tables.comparison_table(d, nasty, "- 1. b"), tables.campaign_table(d)])
    doctree = assert_docutils_clean(out)
    texts = [n.astext() for n in doctree.findall(docutils.nodes.entry)]
    assert nasty in texts and "- list? 1. *bold*" in texts and "- 1. b" in texts


# -- Markdown ---------------------------------------------------------------

def test_md_exact(data):
    assert md.render(tables.comparison_table(data, A, B)) == MD_COMPARISON
    assert md.render(tables.memory_table(data)) == MD_MEMORY


def test_md_escapes_pipes():
    d = CampaignData(1, "x", ["a|b", "c"], [
        Series("a|b", "retr", "R|T", "throughput", "MiB/s", True, (1.0,)),
        Series("c", "retr", "R|T", "throughput", "MiB/s", True, (2.0,))])
    out = md.render(tables.comparison_table(d, "a|b", "c"), title=False)
    assert out.splitlines()[0].count(" | ") == 3  # 4 columns, pipes in text escaped
    assert "a\\|b" in out and "R\\|T" in out


# -- HTML -------------------------------------------------------------------

class _Cells(HTMLParser):
    """Collects (tag, attrs, text) of td/th and checks the document is well nested."""

    def __init__(self):
        super().__init__()
        self.stack, self.cells, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag != "meta":
            self.stack.append(tag)
        if tag in ("td", "th"):
            self.cells.append([tag, dict(attrs), ""])

    def handle_endtag(self, tag):
        assert self.stack and self.stack.pop() == tag, f"unbalanced </{tag}>"

    def handle_data(self, d):
        if self.stack and self.stack[-1] in ("td", "th"):
            self.cells[-1][2] += d


def test_html_fragment_exact(data):
    out = html.render(tables.comparison_table(data, A, B, speedup=True), fragment=True)
    assert out == HTML_FRAGMENT


def test_html_document_parses_and_marks_colours(data):
    out = html.render(tables.comparison_table(data, A, B, speedup=True), note="2 cores, loopback")
    assert out.startswith("<!DOCTYPE html>\n<html lang=\"en\">")
    p = _Cells()
    p.feed(out)
    p.close()
    assert p.stack == []
    assert {"html", "head", "title", "body", "table", "thead", "tbody"} <= set(p.tags)
    green = [c[2] for c in p.cells if "color: green" in c[1].get("style", "")]
    red = [c[2] for c in p.cells if "color: red" in c[1].get("style", "")]
    assert green == ["605.10 MiB/s", "1652.72 MiB/s", "1.08x faster", "+0.08x"]
    assert red == ["1.04x slower", "-0.04x"]
    assert all("win" in c[1]["class"] for c in p.cells if c[2] in green)


def test_html_escapes():
    evil = "<script>alert('x')</script> & co"
    d = CampaignData(1, "x", [evil, "b"], [
        Series(evil, "retr", "<b>RETR</b>", "throughput", "MiB/s", True, (1.0,)),
        Series("b", "retr", "<b>RETR</b>", "throughput", "MiB/s", True, (2.0,))])
    out = html.render(d)
    assert "<script>" not in out and "<b>RETR" not in out
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co" in out
    p = _Cells()
    p.feed(out)
    assert evil in [c[2] for c in p.cells]


# -- CSV --------------------------------------------------------------------

def test_csv_table_exact(data):
    assert csv.render(tables.comparison_table(data, A, B)) == CSV_COMPARISON


def test_csv_data_has_every_raw_sample(data):
    rows = list(stdcsv.DictReader(io.StringIO(csv.render(data))))
    assert len(rows) == len(data.series)
    for row, s in zip(rows, data.series):
        assert [float(row[f"sample_{i}"]) for i in range(1, 6)] == list(s.samples)
        assert row["server"] == s.server and row["metric"] == s.metric
    retr_b = next(r for r in rows if r["server"] == B and r["workload"] == "retr"
                  and r["metric"] == "throughput")
    assert (retr_b["median"], retr_b["ci_low"], retr_b["ci_high"]) == ("1652.72", "1630.1", "1671.3")


def test_csv_several_tables(data):
    out = csv.render([tables.comparison_table(data, A, B), tables.memory_table(data)])
    rows = list(stdcsv.DictReader(io.StringIO(out)))
    assert {r["table"] for r in rows} == {f"{A} vs. {B}", "Memory usage"}
    mem = [r for r in rows if r["table"] == "Memory usage" and r["row"] == "start"]
    assert [float(r["median"]) for r in mem] == [352 * 1024, 6.7 * 1024 * 1024]


# -- JSON -------------------------------------------------------------------

def test_json_exact_and_round_trip():
    out = json.render(tiny())
    assert out == JSON_TINY
    assert json.load_json(out) == tiny()


def test_json_round_trip_full(data):
    assert json.load_json(json.render(data)) == data
    assert json.load_json(json.render(data, indent=None).encode()) == data


def test_json_rejects_unknown_version_and_format():
    doc = stdjson.loads(json.render(tiny()))
    doc["version"] = 2
    with pytest.raises(ValueError, match="unsupported xferlab-results version 2.*version 1"):
        json.load_json(stdjson.dumps(doc))
    doc["format"] = "pyperf"
    with pytest.raises(ValueError, match="not an xferlab-results document"):
        json.load_json(stdjson.dumps(doc))
    with pytest.raises(ValueError, match="invalid xferlab-results JSON"):
        json.load_json("{")
    doc = stdjson.loads(json.render(tiny()))
    del doc["series"][0]["samples"]
    with pytest.raises(ValueError, match="missing 'samples' in series\\[0\\]"):
        json.load_json(stdjson.dumps(doc))


def test_json_tables_document(data):
    doc = stdjson.loads(json.render(tables.comparison_table(data, A, B)))
    assert (doc["format"], doc["version"]) == ("xferlab-tables", 1)
    t = doc["tables"][0]
    assert t["rows"][1][3] == {"text": "1.08x faster", "mark": "win"}
    assert t["records"][1]["b_median"] == 1652.72
    with pytest.raises(ValueError, match="not an xferlab-results document"):
        json.load_json(json.render(tables.comparison_table(data, A, B)))


# -- rich / one-liners --------------------------------------------------------

def test_rich_and_oneliners(data):
    t = tables.comparison_table(data, A, B, ci=True, speedup=True)
    assert text.render_oneliners(t) == ONELINERS
    rt = text.render_rich(t)
    assert [c.header for c in rt.columns] == ["benchmark type", A, B, "ratio", "speedup"]
    assert rt.columns[1].justify == "right"
    out = text.render(t)
    assert "1652.72 MiB/s +- 1%" in out and "not significant" in out and "\x1b[" not in out
    coloured = text.render(t, color=True)
    assert "\x1b[1;32m" in coloured and "\x1b[31m" in coloured


def test_renderers_reject_other_input():
    for mod in (rst, md, html, csv, text):
        with pytest.raises(TypeError, match="expected a Table"):
            mod.render(42)
