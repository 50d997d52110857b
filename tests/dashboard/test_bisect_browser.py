"""A real bisect queued from the dashboard's form in Chromium, run by a real worker to its
answer, and its result page: the repository of tests.support.bisect_repo (pyftpdlib 2.2.0
with a commit that makes every RETR wait 50 ms among harmless ones), 4 concurrent clients
each retrieving 64 KiB, the ``elapsed`` figure.

Reference (tests.support.bisect_repo): pyftpdlib serves every session from one thread, so
the slow commits take at least 4 x 50 ms = 0.2 s, the others well under 0.1 s. The chart's
x-axis is the repository's order, which the repository's maker knows: base, readme,
comment, slow, history, tip (a linear history, each commit made after the one before)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.dashboard.conftest import BROWSER_TOKEN
from tests.support.bisect_repo import make_repo
from tests.support.browser import CHROMIUM, SHOTS, fill_form

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent")]

WIDE = {"width": 1280, "height": 900}
CHART = "Chart.getChart(document.getElementById('bisect-chart'))"


@pytest.mark.timeout(1500)
def test_a_bisect_queued_from_the_form_names_the_slow_commit(engine, server, worker, browser, tmp_path):
    from runner.store.models import BisectJob, Campaign

    repo = make_repo(tmp_path)
    shas = repo["shas"]
    page = browser.new_page(viewport=WIDE)
    page.set_default_timeout(30_000)
    page.goto(f"{server}/login?next=/bisect")
    page.fill("input[name=token]", BROWSER_TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server}/bisect")
    fill_form(page, {"select[name=server]": "pyftpdlib", "input[name=source]": str(repo["path"]),
                     "input[name=good]": "HEAD~5;id", "input[name=bad]": "main",
                     "select[name=workload]": "retr_concurrent", "input[name=metric]": "elapsed",
                     "input[name='params.clients']": "4", "input[name='params.file_size']": "64K",
                     "input[name=repeats]": "4", "input[name=min_effect]": "20%", "select[name=backend]": "local"})
    page.uncheck("input[name=warmup]")
    page.click("#bisect-form button[type=submit]")
    assert "not a git ref xferlab accepts" in page.inner_text(".field-error[data-field=good]")
    page.fill("input[name=good]", shas["base"][:10])
    page.click("#bisect-form button[type=submit]")
    page.wait_for_url(f"{server}/bisect/*")
    job_id = int(page.url.rsplit("/", 1)[1])

    page.goto("about:blank")  # the store is polled below; the page is read when the bisect ended
    seen: list[str] = []
    deadline = time.monotonic() + 1200
    status = "queued"
    while time.monotonic() < deadline:
        with Session(engine) as s:
            status = s.get(BisectJob, job_id).status
        r = page.request.get(f"{server}/bisect/{job_id}")
        assert r.ok, r.status
        seen.append(r.text().split('id="bisect-progress">', 1)[1].split("</p>", 1)[0])
        if status in ("done", "failed"):
            break
        time.sleep(3)
    page.goto(f"{server}/bisect/{job_id}")
    with Session(engine) as s:
        job = s.get(BisectJob, job_id)
        assert job.status == "done", (job.status, job.error, job.log)
        steps, log, commits = list(job.steps), list(job.log), list(job.commits)
        names = {c.id: c.name for c in s.query(Campaign).filter(Campaign.name.like("bisect pyftpdlib %"))}
    assert job.first_bad == shas["slow"] and job.confirmed is True
    assert any("to go" in line for line in log), log
    assert any("steps to go" in t or "step to go" in t for t in seen), seen  # progress shown while running
    page.wait_for_function(f"{CHART} !== undefined")
    assert page.inner_text("code.first-bad") == shas["slow"]
    assert "Confirmed" in page.inner_text("#bisect-answer")

    roles = [st["role"] for st in steps]
    assert roles[:2] == ["good", "bad"] and roles[-2:] == ["confirm", "confirm"] and 1 <= roles.count("step") <= 4
    assert steps[-2]["commit"] == shas["comment"] and steps[-2]["verdict"] == "good"
    assert steps[-1]["commit"] == shas["slow"] and steps[-1]["verdict"] == "bad"
    slow = {shas[k] for k in ("slow", "history", "tip")}
    for st in steps:
        assert st["verdict"] == ("bad" if st["commit"] in slow else "good"), st
        lo, hi = (0.2, 1.5) if st["commit"] in slow else (0.0005, 0.1)
        assert lo <= st["median"] < hi and st["unit"] == "s", st
        assert st["ci_low"] <= st["median"] <= st["ci_high"] and st["n"] >= 4, st
        for cid in st["campaigns"]:
            assert names[cid].split()[2] == st["commit"][:12], (cid, names[cid])

    order = [shas[k] for k in ("base", "readme", "comment", "slow", "history", "tip")]
    assert commits == order  # stored once with the job: the range in the repository's order
    chart = page.evaluate(f"""(() => {{ const c = {CHART}, ds = c.data.datasets;
        return {{points: ds.map(d => d.data.map(p => [p.x, p.y])), colors: ds.map(d => d.borderColor),
        ticks: c.scales.x.ticks.map(t => [t.value, t.label]), xmin: c.scales.x.min, xmax: c.scales.x.max,
        whiskers: (c.$ciWhiskers || []).map(w => [w.dataset, w.index]),
        marks: c.$commitMarks.map(m => [m.label, m.index]), rug: c.$commitRug, ymax: c.scales.y.max}}; }})()""")
    red, green = "#b3261e", "#2a9d5c"
    for ds, roles in ((0, ("good", "bad", "step")), (1, ("confirm",))):
        mine = sorted((order.index(st["commit"]), k, st) for k, st in enumerate(steps) if st["role"] in roles)
        want = [st for _pos, _k, st in mine]
        # each measured commit a point at its place in the repository's order, left to right
        assert [p[0] for p in chart["points"][ds]] == [order.index(st["commit"]) for st in want]
        assert [p[0] for p in chart["points"][ds]] == sorted(p[0] for p in chart["points"][ds])
        assert [p[1] for p in chart["points"][ds]] == pytest.approx([st["median"] for st in want])
        assert chart["colors"][ds] == [red if st["verdict"] == "bad" else green for st in want]
    assert len(chart["points"][1]) == 2  # the confirmation re-measures: the first bad commit and its parent
    assert (chart["xmin"], chart["xmax"]) == (-0.5, 5.5) and chart["rug"] == 6  # every commit has its slot
    measured = sorted({order.index(st["commit"]) for st in steps})
    assert [t[0] for t in chart["ticks"]] == measured and len(measured) < 6  # the others are gaps
    assert [t[1] for t in chart["ticks"]] == [order[i][:7] for i in measured]
    assert sorted(chart["marks"]) == sorted([["good", 0], ["bad", 5], ["first bad", 3]])
    assert sorted(chart["whiskers"]) == sorted([[0, i] for i in range(len(steps) - 2)] + [[1, 0], [1, 1]])
    assert chart["ymax"] >= max(st["ci_high"] for st in steps)  # no whisker cut off
    box = page.evaluate("(() => { const c = document.getElementById('bisect-chart').getBoundingClientRect();"
                        " const t = document.getElementById('bisect-steps').getBoundingClientRect();"
                        " return [c.bottom, t.top, c.height]; })()")
    assert box[0] <= box[1] and box[2] > 150, box  # the chart stays in its box, above the table
    rows = page.locator("#bisect-steps tbody tr")
    assert rows.count() == len(steps)
    assert [int(rows.nth(i).locator("td").nth(2).inner_text()) for i in range(len(steps))] == \
        [order.index(st["commit"]) + 1 for st in steps]  # each step's place in the repository's order
    assert page.locator("#bisect-cancel-form").count() == 0  # a finished bisect has nothing to cancel
    links = page.locator("#bisect-steps a[href^='/campaigns/']")
    assert links.count() == sum(len(st["campaigns"]) for st in steps)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "bisect-result-1280.png"), full_page=True)
    first = steps[-1]["campaigns"][0]
    page.click(f"#bisect-steps a[href='/campaigns/{first}']")
    page.wait_for_url(f"{server}/campaigns/{first}")
    assert shas["slow"][:12] in page.inner_text("h1")
    page.close()
