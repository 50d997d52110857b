"""Browser tests: real headless Chromium (Debian's) driven by Playwright, the dashboard
served by uvicorn, a real ``xferlab worker`` subprocess, real pyftpdlib servers.

Screenshots of every page (1280 px and phone width) go to artifacts/screenshots/.
"""
from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.dashboard.conftest import BROWSER_TOKEN as TOKEN
from tests.dashboard.conftest import ROOT
from tests.support.browser import CHROMIUM, SHOTS, fill_form

pytestmark = [
    pytest.mark.browser, pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]
PHONE = {"width": 390, "height": 844}
WIDE = {"width": 1280, "height": 900}


def _shots(page, name: str) -> None:
    """Screenshot the current page at 1280 px and at phone width."""
    page.set_viewport_size(WIDE)
    page.screenshot(path=str(SHOTS / f"{name}-1280.png"), full_page=True)
    page.set_viewport_size(PHONE)
    page.screenshot(path=str(SHOTS / f"{name}-phone.png"), full_page=True)
    # at phone width nothing may stick out sideways except inside the scrollable table wrappers
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 2, f"{name}: page is {overflow}px wider than a phone screen"
    page.set_viewport_size(WIDE)


def _open(browser, url: str, **kw):
    """A new page of ``browser`` at ``url`` (1280 px wide, 30 s for each wait); ``kw``: more
    options of ``new_page``."""
    page = browser.new_page(viewport=WIDE, **kw)
    page.set_default_timeout(30_000)
    page.goto(url)
    return page


def _open_chart(browser, url: str, canvas: str):
    """:func:`_open` at ``url``, waiting until Chart.js has a chart on canvas ``canvas`` (an id)."""
    page = _open(browser, url)
    page.wait_for_function(f"Chart.getChart(document.getElementById('{canvas}')) !== undefined")
    return page


def _drawn(page, canvas: str) -> bool:
    """Whether canvas ``canvas`` (an id) has been drawn on: some pixel is not transparent."""
    return page.evaluate(f"(() => {{ const c = document.getElementById('{canvas}');"
                         " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
                         " for (let i = 3; i < d.length; i += 4) if (d[i]) return true; return false; })()")


def _cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runner.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=True)


def test_launch_watch_compare_export(server, worker, browser, xferlab_env, tmp_path):
    page = _open(browser, f"{server}/login?next=/launch", accept_downloads=True)
    _shots(page, "login")
    page.fill("input[name=token]", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server}/launch")
    # fill the form, first with a bad value: the error shows beside its field
    fill_form(page, {"input[name=name]": "browser", "input[name=repeats]": "0", "select[name=backend]": "local",
                     "select[name='servers.0.name']": "pyftpdlib", "input[name='servers.0.version']": "2.2.0",
                     "select[name='servers.1.name']": "pyftpdlib", "input[name='servers.1.version']": "2.2.0",
                     "input[name='servers.1.variant']": "use_sendfile=false"})
    page.uncheck("input[value='preset:classic']")
    page.check("input[name=workloads][value=retr]")
    page.check("input[name=workloads][value=login]")
    for f, v in (("clients", "10"), ("file_size", "256K"), ("transfer_size", "4M"), ("duration", "0.2"),
                 ("op_timeout", "20"), ("phase_timeout", "60")):
        page.fill(f"input[name='params.{f}']", v)
    page.click("#launch-button")
    err = page.locator(".field-error[data-field=repeats]")
    assert "greater than or equal to 1" in err.inner_text()
    _shots(page, "launch-errors")
    page.fill("input[name=repeats]", "2")
    page.click("#launch-button")
    page.wait_for_url(f"{server}/campaigns/*")
    cid = int(page.url.rsplit("/", 1)[1])
    _shots(page, "campaign-running")
    # the page polls the API; wait until it shows the campaign finished
    page.wait_for_selector("#progress[data-status=done]", timeout=400_000)
    page.wait_for_selector("#campaign-table")
    assert page.inner_text("#cells") == "8 / 8"
    assert "RETR (server -> client)" in page.inner_text("#figures")
    _shots(page, "campaign-done")

    page.click("a.compare-link")
    page.wait_for_selector("#comparison-table")
    page.wait_for_function("document.querySelectorAll('#bar-charts canvas').length >= 2")
    page.wait_for_function("document.querySelectorAll('#memory-charts canvas').length >= 2")
    assert "RETR (server -> client)" in page.inner_text("#comparison-table")
    assert page.locator("#memory-table").count() == 1
    _shots(page, "compare")
    # sortable: click the benchmark header, rows reorder (geometric mean stays last)
    page.click("#comparison-table th[data-key=title]")
    assert page.locator("#comparison-table th[data-dir=asc]").count() == 1
    # download the RST export; same bytes as the CLI's
    with page.expect_download() as dl:
        page.click("a.export[data-format=rst]")
    got = Path(dl.value.path()).read_bytes()
    a, b = "pyftpdlib 2.2.0", "pyftpdlib 2.2.0 [use_sendfile=False]"
    out = tmp_path / "cli.rst"
    _cli(["compare", a, b, "--campaign", str(cid), "--format", "rst", "-o", str(out)], xferlab_env)
    assert got == out.read_bytes()
    assert b"RETR (server -> client)" in got
    # the campaign export too
    page.goto(f"{server}/campaigns/{cid}")
    with page.expect_download() as dl:
        page.click("a.export[data-format=rst]")
    out = tmp_path / "cli-campaign.rst"
    _cli(["export", str(cid), "--format", "rst", "-o", str(out)], xferlab_env)
    assert Path(dl.value.path()).read_bytes() == out.read_bytes()

    page.goto(f"{server}/")
    page.wait_for_selector("#campaigns")
    _shots(page, "campaigns")


def test_regression_shows(server, browser, store_campaign):
    """Two stored campaigns of one series (label pyftpdlib-dev), 7 repeats each: the second
    is pyftpdlib with use_sendfile false, 40% slower on RETR (Mann-Whitney p = 0.0006, 7
    vs 7, all apart); the regressions page lists it, and its link opens the series' timeline.
    The figures are stored rows (the dashboard renders what the store holds); the real
    worker running a real campaign from the browser is test_launch_watch_compare_export."""
    dev = {"name": "pyftpdlib", "version": "2.2.0", "label": "pyftpdlib-dev"}
    c1 = store_campaign([dev], {(0, "retr"): [1000, 1010, 990, 1005, 995, 1002, 1008]}, workloads=("retr",),
                        repeats=7, name="regression seed")
    c2 = store_campaign([{**dev, "variant": {"use_sendfile": False}}],
                        {(0, "retr"): [600, 610, 590, 605, 598, 603, 607]}, workloads=("retr",), repeats=7,
                        name="regression seed")
    page = _open(browser, f"{server}/regressions")
    row = page.locator("#regressions tr.kind-regression")
    if row.count() < 1:
        detail = urllib.request.urlopen(f"{server}/api/regressions?alpha=1&min_effect=0", timeout=30).read()
        raise AssertionError(f"no regression listed; all changes: {detail.decode()[:3000]}")
    text = row.first.inner_text()
    assert "pyftpdlib" in text and "RETR" in text and f"#{c1}" in text and f"#{c2}" in text
    _shots(page, "regressions")
    page.goto(f"{server}/history")
    _shots(page, "history")
    page.goto(f"{server}/regressions")
    page.locator("#regressions tr.kind-regression a").first.click()
    page.wait_for_selector("#timeline")
    page.wait_for_function("Chart.getChart(document.getElementById('timeline')) !== undefined")
    _shots(page, "series")


def test_fairness_chart_renders(server, browser, fair_campaign):
    """The campaign page draws the per-client curve of its N-client cells from
    /api/campaigns/ID/fairness: one line per repeat, one point per client, fastest first;
    a label holding markup is shown as text, never inserted as HTML."""
    from tests.dashboard.conftest import EVIL

    cid = fair_campaign(label=EVIL)
    page = _open_chart(browser, f"{server}/campaigns/{cid}", "fairness-chart")
    points = page.evaluate("Chart.getChart(document.getElementById('fairness-chart')).data.datasets"
                           ".map(d => d.data.map(p => [p.x, p.y]))")
    assert points == [[[1, 4.0], [2, 2.0], [3, 1.0], [4, 1.0]], [[1, 2.0], [2, 2.0], [3, 2.0], [4, 2.0]]]
    assert page.locator("#fairness-figures tbody tr").count() == 2
    first = page.locator("#fairness-figures tbody tr").first.inner_text()
    assert "0.73" in first and "4.00 MiB/s" in first  # Jain 64/88; the fastest client
    option = page.locator("#fairness-group option").first.inner_text()
    assert option.startswith(EVIL) and "(Jain 0.86)" in option  # median of 0.727 and 1.0, as text
    assert page.locator("#fairness img").count() == 0 and page.title() != "1"
    # the canvas has been drawn on: some pixel is not transparent
    drawn = _drawn(page, "fairness-chart")
    assert drawn
    _shots(page, "campaign-fairness")


def _xy_chart(page, canvas: str) -> dict:
    """The Chart.js chart on canvas ``canvas``: ``data``, per dataset [label, y axis id,
    [[x, y], ...]]; ``x``, the x scale's type; ``ticks``, the x scale's tick values."""
    return page.evaluate("id => { const c = Chart.getChart(document.getElementById(id));"
                         " return { data: c.data.datasets.map(d => [d.label, d.yAxisID, d.data.map(p => [p.x, p.y])]),"
                         " x: c.options.scales.x.type, ticks: c.scales.x.ticks.map(t => t.value) }; }", canvas)


def test_saturation_chart_renders(server, browser, sweep_campaign):
    """The campaign page draws the saturation curve of its sweep from
    /api/campaigns/ID/saturation: throughput and p99 against N on a log2 axis (two y axes),
    the knee marked; a label holding markup is shown as text, never inserted as HTML."""
    from tests.dashboard.conftest import EVIL

    cid = sweep_campaign(label=EVIL)
    page = _open_chart(browser, f"{server}/campaigns/{cid}", "saturation-chart")
    chart = _xy_chart(page, "saturation-chart")
    (tp_label, tp_axis, tp), (p99_label, p99_axis, p99), (knee_label, _, knee) = chart["data"]
    assert tp_label == "throughput (MiB/s)" and tp_axis == "y"
    assert [x for x, _ in tp] == [1, 2, 4, 8] and [round(y) for _, y in tp] == [10, 20, 40, 41]
    assert p99_label == "p99 (ms)" and p99_axis == "y1" and [round(y, 1) for _, y in p99] == [2.0, 2.0, 2.0, 5.0]
    assert knee_label == "knee: N = 4" and [x for x, _ in knee] == [4]
    assert chart["x"] == "logarithmic" and chart["ticks"] == [1, 2, 4, 8]
    summary = page.locator("#saturation-summary").inner_text()
    assert "Knee at N = 4" in summary and "every client up to N = 4" in summary
    assert page.locator("#saturation-group option").first.inner_text().startswith(EVIL)
    assert page.locator("#saturation img").count() == 0 and page.title() != "1"
    drawn = _drawn(page, "saturation-chart")
    assert drawn
    _shots(page, "campaign-saturation")


def test_capacity_chart_renders(server, browser, capacity_campaign):
    """The campaign page draws each capacity search from /api/campaigns/ID/capacity with the
    saturation chart's code: the slowest user's rate and p99 against N on a log2 axis, the
    answer marked; a label holding markup is shown as text, never inserted as HTML."""
    from tests.dashboard.conftest import EVIL

    cid = capacity_campaign(label=EVIL)
    page = _open_chart(browser, f"{server}/campaigns/{cid}", "capacity-chart")
    chart = _xy_chart(page, "capacity-chart")
    (rate_label, rate_axis, rate), (p99_label, p99_axis, p99), (mark_label, _, mark) = chart["data"]
    assert rate_label == "throughput (KiB/s)" and rate_axis == "y" and p99_axis == "y1"
    assert [x for x, _ in rate] == [1, 2, 3, 4] and [round(y) for _, y in rate] == [1229, 1229, 1229, 845]
    assert p99_label == "p99 (ms)" and round(p99[-1][1]) == 50
    assert mark_label == "sustainable users: N = 3" and [x for x, _ in mark] == [3]
    assert chart["x"] == "logarithmic"
    assert "3 users at each user >= 1024 KiB/s" in page.locator("#capacity-summary").inner_text()
    assert page.locator("#capacity-group option").first.inner_text().startswith(EVIL)
    assert page.locator("#capacity img").count() == 0 and page.title() != "1"
    assert _drawn(page, "capacity-chart")
