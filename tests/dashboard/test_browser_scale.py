"""The dashboard at the scale of a lab after weeks, in Debian's headless Chromium: 50
stored campaigns of ten servers (tests/dashboard/many.py, written through the store in
seconds, nothing run); and the launch form's sustained-load, sweep and link fields,
queued from the browser and run by a real worker on a real pyftpdlib.

Screenshots (1280 px and phone width) go to artifacts/screenshots/.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

from tests.dashboard.conftest import BROWSER_TOKEN as TOKEN
from tests.dashboard.many import STEP_AT, TEN_SERVERS, WORKLOADS
from tests.dashboard.test_browser import WIDE, _open, _shots
from tests.support.browser import CHROMIUM, fill_form

pytestmark = [
    pytest.mark.browser, pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]
CAMPAIGNS = 50
#: Tallest the history page may be at 1280 px: the filter form and at most 40 open series
#: rows (dashboard.services.history.OPEN_ROWS) of about 35 px, the folded groups' summaries.
MAX_HISTORY_PX = 3000


def _wait_done(base: str, cid: int, timeout: float = 400) -> dict:
    """The campaign's JSON once its status is neither queued nor running (polled every
    second, at most ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    d: dict = {}
    while time.monotonic() < deadline:
        d = json.loads(urllib.request.urlopen(f"{base}/api/campaigns/{cid}", timeout=10).read())
        if d["status"] not in ("queued", "running"):
            return d
        time.sleep(1)
    raise AssertionError(f"campaign {cid} not finished after {timeout}s: {d}")


def _height(page) -> int:
    return int(page.evaluate("document.documentElement.scrollHeight"))


def _rows(page) -> list[dict]:
    """The visible series rows of the history page: server, workload, metric of each."""
    return page.evaluate("Array.from(document.querySelectorAll('details.series-group[open] tbody tr'))"
                         ".map(r => ({server: r.dataset.server, workload: r.dataset.workload,"
                         " metric: r.dataset.metric}))")


def _sparks(page) -> list[dict]:
    """Each visible sparkline: its number of points, the drawn polyline's box (CSS px) and its
    first and last point."""
    return page.evaluate("""Array.from(document.querySelectorAll('details.series-group[open] svg.spark')).map(s => {
        const line = s.querySelector('polyline'), box = line.getBBox(), pts = line.points;
        return {n: pts.length, attr: parseInt(s.dataset.points, 10), w: box.width, h: box.height,
                height: s.viewBox.baseVal.height, first: pts[0].y, last: pts[pts.length - 1].y,
                track: s.closest('tr').querySelector('td.track')?.textContent,
                workload: s.closest('tr').dataset.workload};
    })""")


def test_history_and_compare_at_fifty_campaigns(server, browser, engine):
    from tests.dashboard.many import store_many

    ids = store_many(engine, campaigns=CAMPAIGNS, repeats=3)
    assert len(ids) == CAMPAIGNS
    page = _open(browser, f"{server}/history")
    # default: the primary figure of every series, one group per benchmark, one row per server
    rows = _rows(page)
    assert len(rows) == len(TEN_SERVERS) * len(WORKLOADS) and {r["metric"] for r in rows} == {""}
    assert page.locator("details.series-group").count() == len(WORKLOADS)
    assert _height(page) <= MAX_HISTORY_PX, f"history is {_height(page)} px tall"
    sparks = _sparks(page)
    assert len(sparks) == len(rows) and all(s["n"] == s["attr"] == CAMPAIGNS for s in sparks)
    assert all(s["w"] > 100 and s["h"] > 5 for s in sparks), sparks[:3]  # drawn across the cell, not flat
    # the step of pyftpdlib 2.2.0 [use_sendfile=False]'s RETR from campaign STEP_AT: its newest point
    # is in the lower half (y grows downwards), its first in the upper part of the wave
    step = next(s for s in sparks if s["track"] == "use_sendfile=false" and s["workload"] == "retr")
    assert step["last"] > step["height"] / 2 > step["first"], step
    assert STEP_AT < CAMPAIGNS
    assert page.locator("td.track", has_text="{}").count() == 0
    assert page.locator("td.track", has_text="default").count() >= 1
    _shots(page, "history-50")

    # every figure: 120 series; the groups past the first 40 rows start folded
    page.select_option("select[name=figure]", "all")
    page.wait_for_url("**figure=all**")
    assert page.locator("#series-count [data-rows]").get_attribute("data-rows") == str(
        len(TEN_SERVERS) * len(WORKLOADS) * 4)
    assert 10 <= len(_rows(page)) <= 40 and _height(page) <= MAX_HISTORY_PX
    page.click("#open-all")
    assert len(_rows(page)) == len(TEN_SERVERS) * len(WORKLOADS) * 4
    page.click("#fold-all")
    assert len(_rows(page)) == 0
    _shots(page, "history-50-all-folded")

    # filters narrow the rows, on the server: tpd (two tracks), then tpd's RETR alone
    page.goto(f"{server}/history")
    page.select_option("select[name=server]", "tpd")
    page.wait_for_url("**server=tpd**")
    rows = _rows(page)
    assert len(rows) == 2 * len(WORKLOADS) and {r["server"] for r in rows} == {"tpd"}
    page.select_option("select[name=workload]", "retr")
    page.wait_for_url("**workload=retr**")
    rows = _rows(page)
    assert [(r["server"], r["workload"]) for r in rows] == [("tpd", "retr")] * 2
    _shots(page, "history-50-filtered")
    # grouped by server and track: ten groups, every figure of each
    page.goto(f"{server}/history?figure=all&group=server")
    assert page.locator("details.series-group").count() == len(TEN_SERVERS)
    assert page.locator("details.series-group summary b").first.inner_text() == "proftpd"
    _shots(page, "history-50-by-server")
    # a sparkline leads to its series' chart
    page.locator("details.series-group[open] td.spark-cell a").first.click()
    page.wait_for_function("Chart.getChart(document.getElementById('timeline')) !== undefined")
    assert page.evaluate("Chart.getChart(document.getElementById('timeline')).data.labels.length") == CAMPAIGNS

    # the compare page of the newest campaign: one bar chart per benchmark, a CI whisker on each bar
    a, b = "pyftpdlib 2.2.0", "pyftpdlib 2.2.0 [use_sendfile=False]"
    page.goto(f"{server}/compare?campaign={ids[-1]}&a={urllib.request.quote(a)}&b={urllib.request.quote(b)}")
    page.wait_for_function(f"document.querySelectorAll('#bar-charts canvas').length === {len(WORKLOADS)}")
    whiskers = page.evaluate("""Array.from(document.querySelectorAll('#bar-charts canvas')).map(c => {
        const ch = Chart.getChart(c), y = ch.scales.y, b = ch.options.plugins.ciWhiskers.bounds;
        const dpr = window.devicePixelRatio, ctx = c.getContext('2d');
        return (ch.$ciWhiskers || []).map(w => {
            // the darkest pixel of the 5 columns around the whisker, half way between its ends
            // (a transparent pixel counts as white)
            let dark = 255;
            const yMid = Math.round((w.yLow + w.yHigh) / 2 * dpr);
            for (let dx = -2; dx <= 2; dx++) {
                const px = ctx.getImageData(Math.round((w.x + dx) * dpr), yMid, 1, 1).data;
                dark = Math.min(dark, px[3] ? Math.max(px[0], px[1], px[2]) : 255);
            }
            return {low: b[w.index][0], high: b[w.index][1], yLow: w.yLow, yHigh: w.yHigh,
                    wantLow: y.getPixelForValue(b[w.index][0]), wantHigh: y.getPixelForValue(b[w.index][1]),
                    median: ch.data.datasets[0].data[w.index], dark};
        });
    })""")
    assert [len(w) for w in whiskers] == [2] * len(WORKLOADS)
    for w in (x for chart in whiskers for x in chart):
        assert w["low"] <= w["median"] <= w["high"] and w["low"] < w["high"]
        assert w["yLow"] == pytest.approx(w["wantLow"]) and w["yHigh"] == pytest.approx(w["wantHigh"])
        assert w["yHigh"] < w["yLow"]  # the high end is drawn above the low end
        assert w["dark"] < 60, w  # the whisker's own colour (#111), not the bar's or the background
    _shots(page, "compare-50")
    page.goto(f"{server}/")
    assert page.locator("#campaigns tbody tr").count() == CAMPAIGNS
    _shots(page, "campaigns-50")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("tc") is None or shutil.which("ip") is None,
                    reason="a shaped link needs root, tc and ip")
def test_launch_form_sustained_sweep_link(server, worker, browser):
    """The launch form queues a sustained-load sweep over loopback and a shaped link; a
    worker runs every cell. Hostile values are refused beside their fields first."""
    page = _open(browser, f"{server}/login?next=/launch")
    page.fill("input[name=token]", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server}/launch")
    presets = page.inner_text("#preset-list")
    assert all(p in presets for p in ("classic", "seed002", "seed003", "seed004"))
    fill_form(page, {"input[name=name]": "sustained form", "input[name=repeats]": "1",
                     "select[name=backend]": "local", "select[name='servers.0.name']": "pyftpdlib",
                     "input[name='servers.0.version']": "2.2.0"})
    page.uncheck("input[value='preset:classic']")
    page.check("input[name=workloads][value=retr_sustained]")
    for f, v in (("file_size", "256K"), ("duration", "0.5"), ("op_timeout", "20"), ("phase_timeout", "60")):
        page.fill(f"input[name='params.{f}']", v)
    page.select_option("select[name='params.session']", "reuse")
    page.fill("input[name='params.user_rate']", "64K")
    page.check("input[name='link.loopback']")
    # hostile values: each refused beside its field, nothing queued
    fill_form(page, {"input[name=sweep]": "1, 2, $(reboot)", "input[name='params.rate']": "-5",
                     "input[name='link.0.rate']": "100mbit;reboot", "input[name='link.0.delay']": "1ms"})
    page.click("#launch-button")
    page.wait_for_selector(".field-error[data-field=sweep]")
    assert "integer" in page.inner_text(".field-error[data-field=sweep]")
    assert "greater than 0" in page.inner_text(".field-error[data-field='params.rate']")
    assert "want a number and bit" in page.inner_text(".field-error[data-field=link]")
    assert page.input_value("input[name=sweep]") == "1, 2, $(reboot)"  # kept for correction
    _shots(page, "launch-sustained-errors")
    assert json.loads(urllib.request.urlopen(f"{server}/api/campaigns", timeout=10).read()) == []
    # corrected: a sweep of 1 and 2 clients, open loop at 50 operations/s, loopback and 100 Mbit/s (a rate
    # alone is tbf; a delay needs netem, which not every kernel has: its cells would be skipped, with why)
    page.fill("input[name=sweep]", "1, 2")
    page.fill("input[name='params.rate']", "50")
    page.fill("input[name='link.0.rate']", "100mbit")
    page.fill("input[name='link.0.delay']", "")
    page.click("#launch-button")
    page.wait_for_url(f"{server}/campaigns/*")
    cid = int(page.url.rsplit("/", 1)[1])
    d = _wait_done(server, cid, timeout=300)
    assert d["status"] == "done" and d["cells_total"] == 4 and d["cells_done"] == 4, json.dumps(d, indent=1)[:6000]
    spec = d["spec"]
    assert spec["link"] == ["loopback", "100mbit/queue=250ms"]
    assert spec["workloads"][0]["sweep"] == [1, 2] and spec["workloads"][0]["params"]["session"] == "reuse"
    assert spec["workloads"][0]["params"]["rate"] == 50 and spec["workloads"][0]["params"]["user_rate"] == 65536
    sat = json.loads(urllib.request.urlopen(f"{server}/api/campaigns/{cid}/saturation", timeout=10).read())
    assert sorted(c["server"] for c in sat["curves"]) == ["pyftpdlib 2.2.0 [link=100mbit/queue=250ms]",
                                                          "pyftpdlib 2.2.0 [link=loopback]"]
    assert all([p["clients"] for p in c["points"]] == [1, 2] for c in sat["curves"])
    # the open loop offers 50 x 256 KiB = 12.5 MiB/s (25 operations due in the 0.5 s phase: one more, due
    # at its very end, adds 4%); 100 Mbit/s carries at most 11.92 MiB/s plus tbf's 64 KiB bucket over the
    # phase (runner.net.conditions); either delivers at least half of it
    offered, link = 50 * 256 * 1024, 100e6 / 8 + 64 * 1024 / 0.5
    for c in sat["curves"]:
        top = min(offered, link) if "100mbit" in c["server"] else offered
        for p in c["points"]:
            assert 0.5 * top <= p["throughput"] * 2**20 <= 1.08 * top, (c["server"], p)
    page.set_viewport_size(WIDE)
    page.wait_for_selector("#progress[data-status=done]")
    page.wait_for_function("Chart.getChart(document.getElementById('saturation-chart')) !== undefined")
    _shots(page, "campaign-sustained-form")
