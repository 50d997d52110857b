"""tpd built from two refs of this repository, measured for real in one campaign (local
backend, small cells), compares on the compare page in Chromium: both servers by their
``@<commit>`` labels, each figure's medians as stored, the charts drawn.

The two refs: the newest commit that changed ``servers/tpd`` and its parent, so the two
builds are different code. References: each shown median is the median of the cell
samples read straight from the store; RETR over loopback moves between 20 MiB/s and
50 GiB/s (the samples' unit is MiB/s), a login takes between 10 us and 2 s."""
from __future__ import annotations

import statistics
import subprocess
import urllib.parse
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from tests.support import REPO_ROOT
from tests.support.browser import CHROMIUM, SHOTS

pytestmark = [pytest.mark.browser, pytest.mark.integration,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent")]


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, check=True, capture_output=True, text=True).stdout.strip()


def _medians(engine, cid: int) -> dict[tuple[str, str], float]:
    from runner.catalogue.workloads import WORKLOADS
    from runner.store.models import Cell, Sample

    out: dict[tuple[str, str], list[float]] = {}
    with Session(engine) as s:
        for label, workload, metric, value in s.execute(
                select(Cell.server_label, Cell.workload, Sample.metric, Sample.value)
                .join(Sample, Sample.cell_id == Cell.id).where(Cell.campaign_id == cid, Sample.stat == "value")):
            if metric == WORKLOADS[workload].primary:
                out.setdefault((label, workload), []).append(value)
    return {k: statistics.median(v) for k, v in out.items()}


@pytest.mark.timeout(900)
def test_tpd_from_two_refs_compares(engine, server, browser):
    from runner.campaign.loop import run_campaign
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, ServerBuild

    try:
        new = _git("log", "-1", "--format=%H", "--", "servers/tpd")
        old = _git("rev-parse", "--verify", f"{new}^1")
    except subprocess.CalledProcessError as e:
        pytest.skip(f"this checkout has no history of servers/tpd: {e.stderr}")
    spec = parse_spec({"name": "tpd two refs", "repeats": 3, "backend": "local", "warmup": False,
                       "servers": [{"name": "tpd", "source": str(REPO_ROOT), "ref": old},
                                   {"name": "tpd", "source": str(REPO_ROOT), "ref": new}],
                       "workloads": [{"name": "retr", "params": {"transfer_size": "8M", "duration": 0.3}},
                                     {"name": "login", "params": {"clients": 10}}]})
    with Session(engine, expire_on_commit=False) as s:
        cid = crud.create_campaign(s, spec=spec, backend="local").id
        s.commit()
    run_campaign(engine, cid)
    a, b = f"tpd @{old[:12]}", f"tpd @{new[:12]}"
    with Session(engine) as s:
        cells = s.execute(select(Cell.server_label, Cell.status, Cell.error, ServerBuild.info)
                          .join(ServerBuild, Cell.build_id == ServerBuild.id, isouter=True)
                          .where(Cell.campaign_id == cid)).all()
    assert len(cells) == 12 and all(st == "done" for _l, st, _e, _i in cells), cells
    assert {(lab, info["source"]["commit"]) for lab, _s, _e, info in cells} == {(a, old), (b, new)}
    medians = _medians(engine, cid)
    for label in (a, b):
        assert 20 <= medians[(label, "retr")] <= 50 * 1024, medians  # MiB/s
        assert 1e-5 <= medians[(label, "login")] <= 2.0, medians  # seconds

    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_default_timeout(30_000)
    page.goto(f"{server}/compare?" + urllib.parse.urlencode({"campaign": cid, "a": a, "b": b}))
    page.wait_for_selector("#comparison-table")
    page.wait_for_function("document.querySelectorAll('#bar-charts canvas').length >= 2")
    text = page.inner_text("main")
    assert a in text and b in text
    data = page.evaluate("JSON.parse(document.getElementById('compare-data').textContent)")
    assert (data["a"], data["b"]) == (a, b)
    rows = {r["title"]: r for r in data["rows"]}
    assert len(rows) == 2, rows
    retr = next(r for t, r in rows.items() if "RETR" in t)
    login = next(r for t, r in rows.items() if "RETR" not in t)
    # the page's units are its own (MiB/s, ms...); the ratio of the medians is unit-free
    assert retr["b"] / retr["a"] == pytest.approx(medians[(b, "retr")] / medians[(a, "retr")], rel=1e-6)
    assert login["b"] / login["a"] == pytest.approx(medians[(b, "login")] / medians[(a, "login")], rel=1e-6)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "compare-tpd-two-refs-1280.png"), full_page=True)
    page.close()
