"""Exports of hostile text (labels come from specs anyone with a token can submit):
no raw HTML, link or line break gets through Markdown, RST or HTML, and no formula
through CSV. Ordinary data keeps its exact bytes: the exact-output
tests in test_report_exports.py cover that."""
from __future__ import annotations

import csv as stdcsv
import io
from html.parser import HTMLParser

import docutils.core
import pytest
from markdown_it import MarkdownIt

from runner.report import csv, html, md, rst, tables
from runner.report.data import CampaignData, Series

IMG = "<img src=x onerror=alert(1)>"
LINK = "[click](javascript:alert(1))"
BARE = "javascript:alert(1)"
BREAK = "x\n\n.. raw:: html\n\n   <script>alert(2)</script>\n\n<script>alert(3)</script>\n"
HOSTILE = [IMG, LINK, BARE, BREAK]


def _data(label: str) -> CampaignData:
    return CampaignData(1, label, [label, "b"], [
        Series(label, "retr", "RETR (server -> client)", "throughput", "MiB/s", True, (1.0, 2.0, 3.0)),
        Series("b", "retr", "RETR (server -> client)", "throughput", "MiB/s", True, (2.0, 3.0, 4.0))])


def _tables(label: str):
    d = _data(label)
    return [tables.comparison_table(d, label, "b"), tables.campaign_table(d)]


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _active(html_text: str) -> list:
    """Tags that run script or link away: img, script, any element with on* or a
    javascript:/data: href/src."""
    p = _Tags()
    p.feed(html_text)
    bad = []
    for tag, attrs in p.tags:
        if tag in ("img", "script", "iframe") or any(k.startswith("on") for k in attrs):
            bad.append((tag, attrs))
        for k in ("href", "src"):
            v = (attrs.get(k) or "").strip().lower()
            if v.startswith(("javascript:", "data:", "vbscript:")):
                bad.append((tag, attrs))
    return bad


@pytest.mark.parametrize("label", HOSTILE, ids=["img", "link", "bare", "break"])
def test_markdown_renders_hostile_label_as_text(label):
    out = md.render(_tables(label))
    assert "<img" not in out and "<script" not in out
    # markdown-it refuses javascript: links itself, other renderers (Python-Markdown) do not
    assert "](javascript" not in out
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(out)
    assert _active(rendered) == [], rendered
    # still one table row per data row: the label did not break the table
    assert len(out.splitlines()) == len(md.render(_tables("plain")).splitlines())
    if label == IMG:  # shown as the text it is
        assert "&lt;img src=x onerror=alert(1)&gt;" in rendered


def test_markdown_keeps_ordinary_text():
    assert md.escape("pyftpdlib 2.2.0 [sendfile=False]") == "pyftpdlib 2.2.0 [sendfile=False]"
    assert md.escape("RETR (server -> client)") == "RETR (server -> client)"


@pytest.mark.parametrize("label", HOSTILE, ids=["img", "link", "bare", "break"])
def test_rst_renders_hostile_label_as_text(label):
    out = rst.render(_tables(label))
    doc = docutils.core.publish_string(out, writer_name="html",
                                       settings_overrides={"report_level": 2, "halt_level": 2,
                                                           "raw_enabled": True}).decode()
    body = doc.split("<body>", 1)[1]
    assert _active(body) == [], body
    assert "alert(2)" not in body or "&lt;script&gt;alert(2)" in body


def test_rst_keeps_ordinary_text():
    for t in ("pyftpdlib 2.2.0 [sendfile=False]", "RETR (server -> client)", "ratio: 1.08x faster"):
        assert rst.escape(t) == t


@pytest.mark.parametrize("label", HOSTILE, ids=["img", "link", "bare", "break"])
def test_html_escapes_hostile_label(label):
    # Jinja2 autoescape (runner/report/html.py) already held: kept as a regression test.
    for fragment in (True, False):
        out = html.render(_tables(label), fragment=fragment)
        assert _active(out) == [], out


@pytest.mark.parametrize("cell", ["=HYPERLINK(\"http://x\",\"y\")", "+1+cmd|' /C calc'!A0", "-2+3",
                                  "@SUM(1)", "\tx", "\r=1"])
def test_csv_neutralises_formula_text(cell):
    for out in (csv.render(_data(cell)), csv.render(_tables(cell))):
        rows = list(stdcsv.reader(io.StringIO(out)))
        texts = [f for r in rows for f in r]
        assert cell not in texts
        assert "'" + cell.replace("\r", "\n") in texts


def test_csv_keeps_numbers_numeric():
    d = CampaignData(1, "c", ["a", "b"], [
        Series("a", "retr", "RETR", "throughput", "MiB/s", True, (-1.5, 2.0)),
        Series("b", "retr", "RETR", "throughput", "MiB/s", True, (-2.5, 3.0))])
    rows = list(stdcsv.DictReader(io.StringIO(csv.render(d))))
    assert rows[0]["sample_1"] == "-1.5" and rows[1]["min"] == "-2.5"
    assert csv.neutralise(-0.04) == -0.04 and csv.neutralise(None) == "" and csv.neutralise("a-b") == "a-b"


@pytest.mark.parametrize("label", [".. image:: https://evil.example/t.png?", ".. raw:: html", ":field: x",
                                   "::", ">>> 1", "| line"])
def test_rst_title_starting_with_markup_is_text(label):
    """A comparison title is 'A vs. B' from spec labels: a label starting with explicit
    markup ('.. image::') became a directive (an <img> in docutils' HTML) before."""
    import docutils.core

    from runner.report.rst import escape

    doc = f"{escape(label + ' vs. b')}\n{'=' * 80}\n\ntext\n"
    html = docutils.core.publish_string(doc, writer="html", settings_overrides={"report_level": 5}).decode()
    body = html.split("<body>", 1)[1]  # the head's stylesheet names img, pre...
    assert "<img" not in body and "<pre" not in body and "field-list" not in body and "line-block" not in body
    assert f'<h1 class="title">{label.replace(">", "&gt;")} vs. b</h1>' in body
