"""A running bisect's page follows it without reloading (dashboard/static/bisect.js): the
store changes under a page open in Chromium, the page shows the change within two polls,
keeps the state the user gave it (the progress log closed, a value set in the window) and,
once the bisect has finished, drops the Cancel button and stops asking."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy.orm import Session

from runner.store.models import BisectJob
from tests.dashboard.conftest import BROWSER_TOKEN

#: The page asks every 5 s (bisect.js POLL_MS): two polls and the rendering.
SEEN_WITHIN_MS = 12_000
REQUEST = {"server": "tpd", "workload": "retr", "metric": "throughput", "good": "v1", "bad": "v2",
           "source": "/src/tpd", "repeats": 3, "min_effect": 0.05, "backend": "local"}


def _update(engine, job_id: int, **values) -> None:
    with Session(engine) as s:
        job = s.get(BisectJob, job_id)
        for k, v in values.items():
            setattr(job, k, v)
        s.commit()


@pytest.mark.integration
def test_a_running_bisects_page_follows_it_without_reloading(server, browser, engine):
    with Session(engine) as s:
        job = BisectJob(request=REQUEST, status="running", steps=[], log=["claimed by a worker"],
                        steps_left=3, commits_left=7, started_at=datetime.now(UTC))
        s.add(job)
        s.commit()
        job_id = job.id
    ctx = browser.new_context()
    ctx.add_cookies([{"name": "xferlab_token", "value": BROWSER_TOKEN, "url": server}])
    page = ctx.new_page()
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if r.url.endswith(f"/bisect/{job_id}") else None)
    page.goto(f"{server}/bisect/{job_id}")
    assert page.locator("#bisect-live").get_attribute("data-live") == "1"
    assert page.locator("noscript").count() == 1  # the reload is only for a browser without scripts
    assert page.locator(".steps-left").inner_text() == "3"
    page.evaluate("() => { window.__stayed = 42; document.getElementById('bisect-log').open = false; }")

    _update(engine, job_id, steps_left=2, commits_left=3, log=["claimed by a worker", "measuring abc1234"])
    page.wait_for_function("() => document.querySelector('.steps-left')?.textContent === '2'",
                           timeout=SEEN_WITHIN_MS)
    assert "measuring abc1234" in page.locator("#bisect-log pre").text_content()  # closed: not rendered
    assert page.evaluate("() => window.__stayed") == 42, "the page reloaded"
    assert page.evaluate("() => document.getElementById('bisect-log').open") is False, "the log was reopened"
    assert page.locator("#bisect-cancel-form").count() == 1

    _update(engine, job_id, status="done", finished_at=datetime.now(UTC), first_bad="b" * 40,
            subject="slow down the sender", confirmed=True, steps_left=0,
            log=["claimed by a worker", "measuring abc1234", "bisect done"])
    page.wait_for_selector("#bisect-answer .first-bad", timeout=SEEN_WITHIN_MS)
    assert page.locator("#bisect-answer").inner_text().count("slow down the sender") == 1
    assert page.locator("#bisect-live").get_attribute("data-live") == "0"
    assert page.locator("#bisect-cancel-form").count() == 0, "the Cancel button of a finished bisect"
    assert page.evaluate("() => window.__stayed") == 42, "the page reloaded"
    asked = len(fetched)
    page.wait_for_timeout(6_000)  # more than one poll interval
    assert len(fetched) == asked, "a finished bisect's page kept asking"
    # the first load, then one fetch per poll: no more than the polls 30 s could hold
    assert 3 <= asked <= 8, fetched
    ctx.close()
