"""The flame graph pages in real headless Chromium (Debian's, through Playwright), on real
profiles (tests/support/real_profile.py): the campaign page links a profiled cell to its
page, inferno's SVG renders in it under its own CSP (no violation), hovering a frame shows
its samples and percentage, clicking a frame zooms it to the full width, the search marks
the matching frames and gives their share; the compare page's differential graph hovers
with the change of share. Screenshots go to artifacts/screenshots/."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.dashboard.conftest import CHROMIUM, SHOTS
from tests.support.real_profile import frame_samples, record, store_profiled_campaign

pytestmark = [
    pytest.mark.browser, pytest.mark.integration,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent (apt-get install chromium)"),
]
WIDE = {"width": 1400, "height": 1000}


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("perf")
    return {"a": record(d, "a")[0], "b": record(d, "b")[0]}


def _until(frame, expression: str, timeout_s: float = 30) -> None:
    """Poll ``expression`` in ``frame`` until true (at most ``timeout_s``). Playwright's
    wait_for_function evaluates its predicate with eval(), which the SVG's CSP refuses, as
    it should; evaluate() goes through the DevTools protocol."""
    deadline = time.monotonic() + timeout_s
    while not frame.evaluate(expression):
        assert time.monotonic() < deadline, f"not true after {timeout_s} s: {expression}"
        time.sleep(0.1)


def _svg_frame(page, suffix: str):
    """The Frame of the embedded SVG whose address holds ``suffix``, once inferno's init()
    ran (its details line is bound)."""
    page.wait_for_function("(s) => [...document.querySelectorAll('iframe')].some(f => f.src.includes(s))", arg=suffix)
    frame = next(f for f in page.frames if suffix in f.url)
    _until(frame, "typeof details !== 'undefined' && details !== null")
    return frame


def _g(frame, name: str):
    """The <g> of frame ``name`` (its title starts with ``name (``)."""
    return frame.locator("#frames > g").filter(has=frame.locator(f"title:text-matches('^{name} \\\\(')"))


def test_flame_graph_page_hover_zoom_search(server, browser, engine, profiles):
    pa = profiles["a"]
    cid, ids = store_profiled_campaign(engine, {"hash-heavy": pa, "copy-heavy": profiles["b"]})
    total = frame_samples(pa.on_cpu, "main")[1]
    page = browser.new_page(viewport=WIDE)
    page.set_default_timeout(30_000)
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(f"{server}/campaigns/{cid}")
    page.locator("#profiles a.profile-link").first.click()
    page.wait_for_url(f"**/cells/{ids['hash-heavy']}/profile")
    assert page.locator("#rate").inner_text() == f"{pa.rate_hz} Hz"
    assert page.locator("#syscalls tbody tr").first.inner_text().split()[:2] == ["write", str(pa.syscalls[0].count)]
    frame = _svg_frame(page, f"/cells/{ids['hash-heavy']}/flamegraph.svg")

    # hover: the details line names the frame, its samples and its share of all samples
    hit, _ = frame_samples(pa.on_cpu, "xfl_hash_block")
    _g(frame, "xfl_hash_block").hover()
    details = frame.locator("#details").text_content()
    assert details == f"Function: xfl_hash_block ({hit} samples, {100 * hit / total:.2f}%)", details

    # click: the frame zooms to the full width of the graph
    frames_w = _g(frame, "all").locator("rect").bounding_box()["width"]  # the root frame: the full width
    rect = _g(frame, "xfl_hash_block").locator("rect")
    before = rect.bounding_box()["width"]
    _g(frame, "xfl_hash_block").click()
    _until(frame, "!document.getElementById('unzoom').classList.contains('hide')")
    after = rect.bounding_box()["width"]
    assert abs(after - frames_w) <= 1.5 and before < 0.95 * frames_w, (before, after, frames_w)
    page.screenshot(path=str(SHOTS / "flamegraph-zoomed.png"), full_page=True)
    frame.locator("#unzoom").click()
    _until(frame, "document.getElementById('unzoom').classList.contains('hide')")

    # search: the prompt's regular expression marks the frames, the share matched is shown
    # (inferno matches the expression against a frame's whole title, "name (N samples, P%)")
    page.once("dialog", lambda d: d.accept(r"^xfl_copy_block \("))
    frame.locator("#search").click()
    _until(frame, "document.getElementById('matched').textContent.startsWith('Matched')")
    copy, _ = frame_samples(pa.on_cpu, "xfl_copy_block")
    matched = frame.locator("#matched").text_content()
    assert matched == f"Matched: {100 * copy / total:.1f}%", (matched, copy, total)
    fill = _g(frame, "xfl_copy_block").locator("rect").get_attribute("fill")
    assert fill == "rgb(230,0,230)", fill  # inferno's search colour
    page.screenshot(path=str(SHOTS / "flamegraph-search.png"), full_page=True)
    assert not violations, violations

    # at phone width nothing sticks out sideways: the graph scrolls inside its frame
    page.set_viewport_size({"width": 390, "height": 844})
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 2, f"the flame graph page is {overflow}px wider than a phone screen"
    page.screenshot(path=str(SHOTS / "flamegraph-phone.png"), full_page=True)


def test_compare_page_differential_graph(server, browser, engine, profiles):
    cid, _ = store_profiled_campaign(engine, {"hash-heavy": profiles["a"], "copy-heavy": profiles["b"]})
    page = browser.new_page(viewport=WIDE)
    page.set_default_timeout(30_000)
    page.goto(f"{server}/compare?campaign={cid}&a=hash-heavy&b=copy-heavy")
    frame = _svg_frame(page, "/compare/flamegraph.svg")
    _g(frame, "xfl_copy_block").hover()
    details = frame.locator("#details").text_content()
    assert details.startswith("Function: xfl_copy_block (") and "; +" in details, details
    _g(frame, "xfl_hash_block").hover()
    assert "; -" in frame.locator("#details").text_content()
    page.screenshot(path=str(SHOTS / "flamegraph-diff.png"), full_page=True)
