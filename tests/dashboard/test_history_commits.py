"""The history page by commit (real Chromium) and the regressions page's annotations:
real tpd campaigns recorded as built from known commits (tests.support.commits), run
out of commit order; the chart's x-axis must list the commits' short SHAs in commit
order with the subject and date in the tooltip; the regressions page must show the
environment facts that moved and the expected false-alarm rate of a calibrated figure."""
from __future__ import annotations

import urllib.parse
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.support.browser import CHROMIUM, SHOTS
from tests.support.commits import LABEL, commits, run_commit_campaign

WIDE = {"width": 1280, "height": 900}


def _series_url(base: str, engine, by: str) -> str:
    from runner.history import list_series

    with Session(engine) as s:
        row = next(r for r in list_series(s) if r["track"] == LABEL and r["metric"] == "")
    q = {"server": row["server"], "track": row["track"], "workload": row["workload"], "params_key": row["params_key"],
         "by": by}
    return f"{base}/history/series?{urllib.parse.urlencode(q)}"


@pytest.mark.browser
@pytest.mark.integration
@pytest.mark.timeout(600)
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)")
def test_history_page_shows_the_series_by_commit(engine, server, browser):
    history = commits(4, first_slow=4)  # no slow commit: the axis is what is checked
    for i in (3, 1, 0, 2):  # campaigns stored out of commit order
        run_commit_campaign(engine, history[i], repeats=2)
    page = browser.new_page(viewport=WIDE)
    page.set_default_timeout(30_000)
    page.goto(_series_url(server, engine, "time"))
    page.wait_for_function("Chart.getChart(document.getElementById('timeline')) !== undefined")
    by_time = page.evaluate("Chart.getChart(document.getElementById('timeline')).data.labels")
    assert [lab.split()[0] for lab in by_time] == sorted(lab.split()[0] for lab in by_time)  # campaign ids
    page.click("#by-commit")
    page.wait_for_url("**by=commit**")
    page.wait_for_function("Chart.getChart(document.getElementById('timeline')) !== undefined")
    labels = page.evaluate("Chart.getChart(document.getElementById('timeline')).data.labels")
    assert labels == [c.sha[:7] for c in history]
    assert page.evaluate("Chart.getChart(document.getElementById('timeline')).options.scales.x.type") == "category"
    # the tooltip of the third point: its short SHA and subject, then its author date
    tip = page.evaluate("""(() => { const ch = Chart.getChart(document.getElementById('timeline'));
        ch.tooltip.setActiveElements([{datasetIndex: 2, index: 2}], {x: 0, y: 0}); ch.update();
        return ch.tooltip.title; })()""")  # Chart.js 3: the title lines, then the afterTitle lines
    assert tip[0] == f"{history[2].sha[:7]} {history[2].subject}"
    assert tip[1].startswith(history[2].author_date + " · campaign #")
    cells = page.locator("#points tbody tr td:first-child code").all_inner_texts()
    assert cells == [c.sha[:7] for c in history]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "series-by-commit-1280.png"), full_page=True)
    page.close()


def test_regressions_page_shows_what_moved_and_the_expected_false_alarm_rate(client, engine, store_campaign):
    """Stored rows (the page renders what the store holds): two A/A campaigns calibrate
    pyftpdlib RETR in envA; a third, 40% slower, is a regression with that calibration's
    rate; a fourth in envB (kernel moved) is an environment change listing the kernel."""
    from runner.history.calibration import calibrate_campaigns, store_results

    dev = {"name": "pyftpdlib", "version": "2.2.0", "label": "dev"}
    a1 = store_campaign([dev], {(0, "retr"): [1000, 1010, 990, 1005]}, workloads=("retr",))
    a2 = store_campaign([dev], {(0, "retr"): [1003, 1012, 994, 1001]}, workloads=("retr",))
    with Session(engine) as s:
        results = calibrate_campaigns(s, [a1, a2], metrics=("",))
        store_results(s, results)
        s.commit()
    assert len(results) == 1 and results[0].noise_floor == pytest.approx((1002.5 - 1002.0) / 1002.25)
    assert results[0].false_alarms == 0 and results[0].pairs == 1
    store_campaign([dev], {(0, "retr"): [600, 610, 590, 605]}, workloads=("retr",))
    store_campaign([dev], {(0, "retr"): [600, 611, 592, 604]}, workloads=("retr",), env_class="envB")
    api = client.get("/api/regressions").json()["changes"]
    primary = [c for c in api if c["series"]["metric"] == ""]
    reg = next(c for c in primary if c["kind"] == "regression")
    assert reg["false_alarm_rate"] == 0.0 and reg["calibration"] is not None
    assert reg["noise_floor"] == pytest.approx(results[0].noise_floor) and reg["env_diff"] == []
    env = next(c for c in primary if c["kind"] == "env_changed")
    assert env["env_diff"] == [{"name": "kernel", "before": "envA", "after": "envB"}]
    assert env["false_alarm_rate"] is None
    html = client.get("/regressions").text
    assert "<b>kernel</b>: envA &rarr; envB" in html
    assert '<td class="num false-alarms">0.0% <span class="muted small">(noise 0.0%)</span>' in html
    assert "uncalibrated" not in html
    from runner.store.models import NoiseCalibration

    with Session(engine) as s:  # without the calibration the same regression is uncalibrated
        s.query(NoiseCalibration).delete()
        s.commit()
    page = client.get("/regressions").text
    assert '<td class="num false-alarms"><span class="muted small">uncalibrated</span>' in page
    assert next(c for c in client.get("/api/regressions").json()["changes"]
                if c["kind"] == "regression")["false_alarm_rate"] is None
