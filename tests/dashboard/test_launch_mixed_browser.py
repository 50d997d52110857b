"""The launch form in Chromium: a mixed-sessions campaign with a capacity search and a shaped
link built from the form's fields alone, the parts of the form shown as the workload and the
size distribution are chosen (dashboard/static/app.js), a bad weight refused beside its field
with every input kept, then queued; the stored spec is the one the CLI parses from the same
values (tests.dashboard.test_launch_mixed.CLI_SPEC). Nothing is run: no worker."""
from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from runner.spec.model import parse_spec
from tests.dashboard.conftest import BROWSER_TOKEN
from tests.dashboard.test_launch_mixed import CLI_SPEC, FORM
from tests.support.browser import CHROMIUM, SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent")]

WIDE = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def _visible(page, selector: str) -> bool:
    return page.locator(selector).is_visible()


def test_mixed_capacity_campaign_from_the_form(engine, server, browser):
    from runner.store.models import Campaign

    page = browser.new_page(viewport=WIDE)
    page.set_default_timeout(30_000)
    problems: list[str] = []
    # script errors (a resource's status, the form's 422 and the absent favicon included, is not one)
    page.on("console", lambda m: problems.append(m.text) if m.type == "error"
            and not m.text.startswith("Failed to load resource") else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(f"{server}/login?next=/launch")
    page.fill("input[name=token]", BROWSER_TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(f"{server}/launch")

    # the classic preset is chosen: no mixed, capacity or open-loop fields; the sweep is always there
    assert not _visible(page, "#mixed") and not _visible(page, "#capacity")
    assert not _visible(page, "select[name='params.session']") and not _visible(page, "input[name='params.rate']")
    assert _visible(page, "input[name=sweep]")
    page.uncheck("input[value='preset:classic']")
    page.check("input[name=workloads][value=mixed]")
    assert _visible(page, "#mixed") and _visible(page, "#capacity") and _visible(page, "input[name='params.rate']")
    assert not _visible(page, "select[name='params.session']")  # reuse/per_op: the sustained workloads only
    # the default mix is written out; blank the ones this campaign does not use
    assert page.input_value("input[name='params.mix.retr']") == "40"
    for op in ("cwd", "size", "mdtm", "dele", "resume", "mlsd"):
        page.fill(f"input[name='params.mix.{op}']", "")
    # size distribution: fixed shows the file size; buckets shows the bucket rows instead
    assert _visible(page, "input[name='params.sizes.size']") and not _visible(page, "#size-buckets")
    # typed, then hidden by choosing buckets: not sent
    page.fill("input[name='params.sizes.size']", FORM["params.sizes.size"])
    page.select_option("select[name='params.sizes.kind']", FORM["params.sizes.kind"])
    assert _visible(page, "#size-buckets") and not _visible(page, "input[name='params.sizes.size']")
    assert not _visible(page, "input[name='params.sizes.min']")
    assert not _visible(page, "input[name='params.think_ms']")
    page.select_option("select[name='params.think']", "exponential")
    assert _visible(page, "input[name='params.think_ms']")
    for name, value in FORM.items():  # as typed in tests.dashboard.test_launch_mixed, in its order
        if name in ("workloads", "link.loopback", "params.sizes.size"):
            continue  # ticked above; ticked on a fresh form; typed above, now hidden
        if page.locator(f"select[name='{name}']").count():
            page.select_option(f"select[name='{name}']", value)
        else:
            page.fill(f"input[name='{name}']", value)
    page.fill("input[name='params.mix.retr']", "-3")
    page.uncheck("input[name=warmup]")
    page.click("#launch-button")
    page.wait_for_selector(".field-error[data-field='params.mix.retr']")
    assert "greater than or equal to 0" in page.inner_text(".field-error[data-field='params.mix.retr']")
    with Session(engine) as s:
        assert s.query(Campaign).count() == 0
    # the other inputs kept, and the parts they live in still shown
    assert _visible(page, "#mixed") and _visible(page, "#size-buckets")
    assert _visible(page, "input[name='params.think_ms']")
    for name, value in {**FORM, "params.mix.retr": "-3"}.items():
        if name not in ("workloads", "link.loopback"):
            assert page.input_value(f"[name='{name}']") == value, name
    assert page.input_value("input[name='params.mix.cwd']") == ""
    page.set_viewport_size(PHONE)
    page.screenshot(path=str(SHOTS / "launch-mixed-errors-phone.png"), full_page=True)
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 2, f"the form is {overflow}px wider than a phone screen"
    page.set_viewport_size(WIDE)
    page.screenshot(path=str(SHOTS / "launch-mixed-errors-1280.png"), full_page=True)

    page.fill("input[name='params.mix.retr']", "3")
    page.click("#launch-button")
    page.wait_for_url(f"{server}/campaigns/*")
    cid = int(page.url.rsplit("/", 1)[1])
    with Session(engine) as s:
        camp = s.get(Campaign, cid)
        stored, status = camp.spec, camp.status
    assert status == "queued"
    assert stored == parse_spec(CLI_SPEC, "cli", from_dashboard=True).model_dump(mode="json")
    p = stored["workloads"][0]["params"]
    assert p["mix"]["retr"] == 3 and p["mix"]["cwd"] == 0 and p["sizes"]["buckets"] == {"4096": 3, "65536": 1}
    assert p["sizes"]["size"] == 1 << 20 and p["think"] == "exponential" and p["think_ms"] == 20
    assert stored["workloads"][0]["capacity"]["confirm"] is False and stored["link"][1] == "100mbit/queue=256kb/pfifo"
    assert problems == []
