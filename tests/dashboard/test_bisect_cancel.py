"""Cancelling a bisect (runner.campaign.bisect_job.cancel): from its page's button (the token
and the CSRF token, as every form) and with ``xferlab bisect-cancel``. A queued one is
never started by a worker; a running one is stopped by its real worker after the cell in
flight, its step's campaign cancelled as any campaign is, and nothing stored before is lost
(the steps measured, the cells of the cancelled campaign that finished)."""
from __future__ import annotations

import html
import re
import subprocess
import sys
import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from runner.store.models import BisectJob, Campaign, Cell, Sample
from tests.dashboard.conftest import BROWSER_TOKEN
from tests.dashboard.test_bisect_form import _form, checkout  # noqa: F401 - the fixture, reused
from tests.support.bisect_repo import make_repo
from tests.support.browser import CHROMIUM, SHOTS

#: The longest a running bisect may take to stop once cancelled: the cell in flight (4
#: clients each retrieving 64 KiB from pyftpdlib, a server start, on a loaded 2-core machine)
#: and one poll of the worker.
STOP_BOUND_S = 120


def _page_csrf(client, job_id: int) -> str:
    text = client.get(f"/bisect/{job_id}").text
    form = text.split('id="bisect-cancel-form"', 1)[1].split("</form>", 1)[0]
    return re.search(r'name="csrf_token" value="([0-9a-f]+)"', form).group(1)


def _bisect_campaigns(engine) -> int:
    with Session(engine) as s:
        return s.scalar(select(func.count()).select_from(Campaign).where(Campaign.name.like("bisect %"))) or 0


@pytest.mark.integration
def test_a_queued_bisect_cancelled_is_never_started(client, engine, checkout, xferlab_env, capsys):  # noqa: F811
    from runner.cli import main

    r = client.post("/bisect", data=_form(client, checkout), follow_redirects=False)
    assert r.status_code == 303, r.text[:2000]
    job_id = int(r.headers["location"].rsplit("/", 1)[1])
    token = _page_csrf(client, job_id)
    assert "Cancel bisect" in client.get(f"/bisect/{job_id}").text

    client.cookies.clear()  # no token: refused, nothing changes
    assert client.post(f"/bisect/{job_id}/cancel", data={"csrf_token": token},
                       follow_redirects=False).status_code == 401
    client.cookies.set("xferlab_token", "test-token-123")
    assert client.post(f"/bisect/{job_id}/cancel", data={"csrf_token": "0" * 64},
                       follow_redirects=False).status_code == 403
    with Session(engine) as s:
        assert s.get(BisectJob, job_id).status == "queued"

    r = client.post(f"/bisect/{job_id}/cancel", data={"csrf_token": token}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == f"/bisect/{job_id}"
    with Session(engine) as s:
        job = s.get(BisectJob, job_id)
        assert job.status == "cancelled" and job.finished_at is not None, (job.status, job.finished_at)
        assert "cancelled from the dashboard before a worker started it" == job.error
    assert client.post(f"/bisect/{job_id}/cancel", data={"csrf_token": token},
                       follow_redirects=False).status_code == 409
    assert client.post("/bisect/99999/cancel", data={"csrf_token": token}, follow_redirects=False).status_code == 404

    # a real worker finds nothing to run: the bisect is never claimed, no campaign is made
    p = subprocess.run([sys.executable, "-m", "runner.cli", "worker", "--once", "--poll", "0.2"], env=xferlab_env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "claimed" not in p.stderr, p.stderr[-2000:]
    with Session(engine) as s:
        job = s.get(BisectJob, job_id)
        assert job.status == "cancelled" and job.started_at is None and job.owner is None and job.steps == []
    assert _bisect_campaigns(engine) == 0
    page = client.get(f"/bisect/{job_id}").text
    assert "Cancelled:" in page and 'http-equiv="refresh"' not in page and "bisect-cancel-form" not in page

    # the command line: a second queued bisect cancelled; a finished or unknown one refused
    r = client.post("/bisect", data=_form(client, checkout), follow_redirects=False)
    other = int(r.headers["location"].rsplit("/", 1)[1])
    assert main(["bisect-cancel", str(other)]) == 0
    assert capsys.readouterr().out.strip() == f"bisect {other} cancelled"
    with Session(engine) as s:
        job = s.get(BisectJob, other)
        assert job.status == "cancelled" and job.error == "cancelled from the command line before a worker started it"
    assert main(["bisect-cancel", str(other)]) == 2
    assert f"bisect {other} is already cancelled" in capsys.readouterr().err
    assert main(["bisect-cancel", "99999"]) == 2
    assert "no bisect 99999" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.browser
@pytest.mark.skipif(not __import__("pathlib").Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent")
@pytest.mark.timeout(1200)
def test_a_running_bisect_cancelled_from_its_page_stops_after_the_cell_in_flight(engine, server, worker, browser,
                                                                                   tmp_path):
    from runner.campaign import bisect_job

    repo = make_repo(tmp_path)
    shas = repo["shas"]
    req, errors = bisect_job.validate({
        "server": "pyftpdlib", "source": str(repo["path"]), "good": shas["base"], "bad": "main",
        "workload": "retr_concurrent", "params": {"clients": 4, "file_size": "64K"}, "metric": "elapsed",
        "repeats": 5, "min_effect": 0.2, "backend": "local", "warmup": False})
    assert req is not None, errors
    with Session(engine) as s:
        job_id = bisect_job.queue(s, req)

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(30_000)
    page.goto(f"{server}/login?next=/bisect/{job_id}")
    page.fill("input[name=token]", BROWSER_TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server}/bisect/{job_id}")
    # the page is left while the test polls the store (minutes), and opened fresh to cancel
    page.goto("about:blank")

    # wait until a step is stored and the campaign of a later step has a finished cell
    deadline = time.monotonic() + 900
    while True:
        assert worker.poll() is None, "the worker died"
        with Session(engine) as s:
            job = s.get(BisectJob, job_id)
            assert job.status in ("queued", "running"), (job.status, job.error, job.log[-5:])
            cid = job.campaign_id
            steps_before = list(job.steps)
            done = s.scalar(select(func.count()).select_from(Cell).where(
                Cell.campaign_id == cid, Cell.status == "done")) if cid else 0
        if steps_before and all(cid not in st["campaigns"] for st in steps_before) and done >= 1:
            break
        assert time.monotonic() < deadline, "the bisect did not reach its second campaign in 900 s"
        time.sleep(0.5)
    assert steps_before[0]["role"] == "good" and job.commits[0] == shas["base"]

    page.goto(f"{server}/bisect/{job_id}")
    page.click("#bisect-cancel-form button[type=submit]")
    t0 = time.monotonic()
    page.wait_for_url(f"{server}/bisect/{job_id}")
    assert "Cancelled:" in page.inner_text("#bisect-progress")
    page.goto("about:blank")  # the store is polled until the worker stopped
    while True:
        with Session(engine) as s:
            job = s.get(BisectJob, job_id)
            if job.finished_at is not None:
                break
        assert time.monotonic() - t0 < STOP_BOUND_S, f"not stopped {STOP_BOUND_S} s after the cancel: {job.log[-5:]}"
        time.sleep(0.2)
    stopped_s = time.monotonic() - t0
    time.sleep(3)  # a worker that went on would make the next campaign now

    with Session(engine) as s:
        job = s.get(BisectJob, job_id)
        assert job.status == "cancelled" and job.campaign_id is None, (job.status, job.error)
        assert job.error == "cancelled from the dashboard while running; the finished steps are stored campaigns"
        assert job.steps == steps_before  # the steps measured before stay
        assert "bisect stopped: cancelled" in job.log[-1] and f"campaign {cid}" in job.log[-1], job.log[-3:]
        camp = s.get(Campaign, cid)
        assert camp.status == "cancelled", camp.status
        cells = dict(s.execute(select(Cell.status, func.count()).where(Cell.campaign_id == cid)
                               .group_by(Cell.status)).all())
        assert set(cells) <= {"done", "failed", "cancelled"} and sum(cells.values()) == 5, cells
        assert cells.get("done", 0) >= done and cells.get("cancelled", 0) >= 1, (cells, done)
        # every finished cell of the cancelled campaign keeps its figure
        kept = s.scalar(select(func.count()).select_from(Sample).join(Cell, Sample.cell_id == Cell.id).where(
            Cell.campaign_id == cid, Cell.status == "done", Sample.metric == "elapsed", Sample.stat == "value"))
        assert kept == cells.get("done", 0)
        for st in steps_before:
            for measured in st["campaigns"]:
                assert s.get(Campaign, measured).status == "done" and s.get(Campaign, measured).cells_done == 5
        later = s.scalar(select(func.count()).select_from(Campaign).where(Campaign.id > cid))
        assert later == 0  # no step started after the cancel
    assert worker.poll() is None  # the worker goes on, ready for the next campaign or bisect
    page.goto(f"{server}/bisect/{job_id}")
    text = html.unescape(page.content())
    assert "Cancelled:" in text and 'http-equiv="refresh"' not in text and "bisect-cancel-form" not in text
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "bisect-cancelled-1280.png"), full_page=True)
    print(f"stopped {stopped_s:.1f} s after the cancel; cells of campaign {cid}: {cells}")
    page.close()
