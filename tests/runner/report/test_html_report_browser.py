"""The HTML report opened in a real headless Chromium with the network off (an offline
context, and every request that is not the file itself aborted and recorded): Debian's
Chart.js inlined runs under the report's Content-Security-Policy, every chart is drawn from
the embedded data (Chart.js instances with the expected datasets, the CI whiskers' pixels on
the canvas), no console error, no request, hostile labels stay text. Screenshots go to
artifacts/screenshots/."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runner.report.chart_fixture import EVIL, SERVERS, chart_campaign
from tests.support.browser import CHROMIUM, SHOTS, chromium

CHARTJS = Path("/usr/share/javascript/chart.js/chart.min.js")
pytestmark = [
    pytest.mark.browser, pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
    pytest.mark.skipif(not CHARTJS.exists(), reason=f"{CHARTJS} is absent (apt-get install libjs-chart.js)"),
]
ROOT = Path(__file__).resolve().parents[3]

#: Every Chart.js chart of the page: the canvas's aria-label, type, and per dataset its label,
#: its data as given, and its CI whiskers.
CHARTS_JS = """Object.values(Chart.instances).map(c => ({
  label: c.canvas.getAttribute('aria-label'), type: c.config.type,
  datasets: c.data.datasets.map(d => ({ label: d.label, data: d.data, ci: d.ci || null })) }))"""

#: Whether every canvas has been drawn on (some pixel not transparent).
ALL_DRAWN_JS = """Array.from(document.querySelectorAll('canvas')).every(c => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  for (let i = 3; i < d.length; i += 4) if (d[i]) return true; return false; })"""

#: The colour of the pixels at the top of each whisker and in the middle of each bar of the
#: bar chart whose canvas is labelled `label`: [[whisker top RGBA, bar middle RGBA], ...].
WHISKER_PIXELS_JS = """label => {
  const c = Object.values(Chart.instances).find(x => x.canvas.getAttribute('aria-label') === label);
  const ds = c.data.datasets[0], meta = c.getDatasetMeta(0), r = window.devicePixelRatio, ctx = c.ctx;
  const px = (x, y) => Array.from(ctx.getImageData(Math.round(x * r), Math.round(y * r), 1, 1).data);
  return meta.data.map((bar, j) => [px(bar.x, c.scales.y.getPixelForValue(ds.ci[j][1])),
                                    px(bar.x + bar.width / 4, (bar.y + bar.base) / 2)]); }"""


@pytest.fixture
def browser():
    yield from chromium()


def _open_offline(browser, path: Path):
    """``path`` in a new offline page (1280 px wide); returns (page, requests other than the
    file, console errors and page errors), after the report's script has run."""
    ctx = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
    requests: list[str] = []
    errors: list[str] = []

    def route(r):
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            requests.append(r.request.url)
            r.abort()

    ctx.route("**/*", route)
    page = ctx.new_page()
    page.set_default_timeout(30_000)
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())  # returns at the load event: the report's script ran at DOMContentLoaded
    # polled from here: wait_for_function's in-page polling evaluates strings, which the report's CSP forbids
    deadline = time.monotonic() + 30
    while page.evaluate("document.documentElement.dataset.charts") is None and time.monotonic() < deadline:
        time.sleep(0.1)
    return page, requests, errors


def test_report_draws_every_chart_offline(browser, tmp_path, monkeypatch):
    """The fixture campaign: 3 bar charts of 3 servers with whiskers, 2 comparisons of 3 rows
    and the geometric mean, 3 memory charts of 2 timelines of 20 points, Jain's index and the
    least fair server's per-client curves (tpd: 3 repeats of 10 clients), the sweep's curve with
    its knee: 11 charts, all drawn, nothing fetched, nothing logged."""
    from runner.report.charts import chart_data
    from runner.report.render import campaign_report

    monkeypatch.setenv("XFERLAB_CHARTJS_PATH", str(CHARTJS))
    data = chart_campaign()
    want = chart_data(data)
    path = tmp_path / "report.html"
    path.write_text(campaign_report(data, fmt="html"))
    page, requests, errors = _open_offline(browser, path)
    assert requests == [] and errors == []
    assert page.evaluate("document.documentElement.dataset.charts") == "11"
    charts = page.evaluate(CHARTS_JS)
    bars = charts[:3]
    for got, exp in zip(bars, want["bars"]):
        (ds,) = got["datasets"]
        assert got["label"] == exp["title"] and got["type"] == "bar"
        assert ds["data"] == [b["median"] for b in exp["bars"]]
        assert ds["ci"] == [[b["ci_low"], b["ci_high"]] for b in exp["bars"]]
    ratios = charts[3:5]
    assert [c["label"] for c in ratios] == [f"{s} vs. {SERVERS[0]}" for s in SERVERS[1:]]
    for got, exp in zip(ratios, want["ratios"]):
        assert got["datasets"][0]["data"] == [[1, r["better"]] for r in exp["rows"]] + [[1, exp["geomean"]]]
    memory = charts[5:8]
    assert [c["label"] for c in memory] == [f"memory of {s}" for s in SERVERS]
    assert all([len(d["data"]) for d in c["datasets"]] == [20, 20] for c in memory)
    jain, curve, sat = charts[8:]
    assert [d["label"] for d in jain["datasets"]] == SERVERS and all(len(d["data"]) == 1 for d in jain["datasets"])
    assert [len(d["data"]) for d in curve["datasets"]] == [10, 10, 10]
    assert curve["datasets"][0]["data"][0] == {"x": 1, "y": 10.0}  # tpd's fastest client
    assert curve["datasets"][0]["data"][-1]["y"] == pytest.approx(10.0 - 9 * 0.9, abs=1e-4)
    assert [d["label"] for d in sat["datasets"]] == ["throughput (MiB/s)", "p99 (ms)", "knee: N = 4"]
    assert [len(d["data"]) for d in sat["datasets"]] == [4, 4, 1]
    assert page.evaluate(ALL_DRAWN_JS)
    # the whisker plugin drew: the top of each whisker (above its bar, where the canvas is
    # otherwise transparent) is the whisker's near-black, mostly opaque (anti-aliased), the
    # bar's middle its server's colour (COLORS of report.js: #1d5fbf, #d9822b, #2a9d5c)
    pixels = page.evaluate(WHISKER_PIXELS_JS, "RETR (server -> client)")
    assert all(max(top[:3]) < 80 and top[3] >= 128 for top, _ in pixels), pixels
    assert [mid[:3] for _, mid in pixels] == [[0x1d, 0x5f, 0xbf], [0xd9, 0x82, 0x2b], [0x2a, 0x9d, 0x5c]]
    # the hostile label is text: in the picker, never an element; the title is untouched
    assert any(EVIL in o for o in page.locator("#fairness-charts option").all_inner_texts())
    assert page.locator("img").count() == 0 and page.title() == "xferlab campaign 7: charts"
    assert page.locator(".charts-note").is_hidden()
    page.screenshot(path=str(SHOTS / "html-report-1280.png"), full_page=True)


def test_cli_export_of_a_stored_campaign_opens_with_its_charts(browser, engine, xferlab_env, tmp_path):
    """``xferlab export ID --format html -o FILE`` of a campaign stored as a run stores it (the
    golden exports' fixed campaign: 3 servers, the classic suite and a 20-client RETR, 3 repeats)
    opens offline with one bar chart per benchmark row, the two comparisons with the reference
    and Jain's index; Debian's Chart.js is in the file."""
    from sqlalchemy.orm import Session

    from runner.report.charts import chart_data
    from runner.report.reader import load_campaign
    from tests.runner.report.test_export_golden import store_fixed_campaign

    cid = store_fixed_campaign(engine)
    with Session(engine) as s:
        want = chart_data(load_campaign(s, campaign_id=cid))
    out = tmp_path / "classic.html"
    env = {**xferlab_env, "XFERLAB_CHARTJS_PATH": str(CHARTJS)}
    p = subprocess.run([sys.executable, "-m", "runner.cli", "export", str(cid), "--format", "html", "-o", str(out)],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = out.read_text()
    assert CHARTJS.read_text() in doc
    page, requests, errors = _open_offline(browser, out)
    assert requests == [] and errors == []
    # the classic suite's 8 rows at least, each server against the first, N-client rows' Jain
    assert len(want["bars"]) >= 8 and len(want["ratios"]) == 2 and want["fairness"]["jain"]
    charts = page.evaluate(CHARTS_JS)
    count = len(want["bars"]) + len(want["ratios"]) + 1  # Jain's index: one chart of every N-client row
    assert page.evaluate("document.documentElement.dataset.charts") == str(len(charts)) == str(count)
    assert [c["label"] for c in charts[:9]] == [b["title"] for b in want["bars"]]
    assert all(len(c["datasets"][0]["data"]) == len(b["bars"]) for c, b in zip(charts, want["bars"]))
    assert page.evaluate(ALL_DRAWN_JS)
    page.screenshot(path=str(SHOTS / "html-report-export-1280.png"), full_page=True)
