"""History by commit and "why the environment moved": real tpd campaigns recorded as
built from known commits (tests.support.commits), run out of commit order, slower from a
known commit on; the environment of the last one moved (kernel, one sysctl). Checked:
the commit order, the change named at the slow commit, and the facts that differ at
each change against the stored rows."""
from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime

import pytest
from sqlalchemy.orm import Session

from runner.history.bycommit import commit_order
from runner.history.provenance import PointContext, Source, fact_diff, facts_of, source_of
from runner.history.series import Point
from runner.net import link as linknet
from tests.support.commits import LABEL, commits, run_commit_campaign
from tests.support.skips import not_root, skip_if_problem

XFERLAB = [sys.executable, "-m", "runner.cli"]


def _src(sha: str, date: str, index: int | None) -> Source:
    return Source("/src", None, sha * 40, None, "s", date, index)


def test_commit_order_by_index_else_by_author_date():
    pts = [Point(i, "c", datetime(2026, 1, 1), "v", "l", "e", "MiB/s", [1.0]) for i in range(4)]
    ctx = [PointContext(_src("a", "2026-01-03T00:00:00+00:00", 2), {}),
           PointContext(None, {}),  # no source: left out
           PointContext(_src("b", "2026-01-01T00:00:00+01:00", 0), {}),
           PointContext(_src("c", "2026-01-02T00:00:00Z", 1), {})]
    assert commit_order(pts, ctx) == ([2, 3, 0], "commit_index")
    ctx[0] = PointContext(_src("a", "2026-01-03T00:00:00+00:00", None), {})
    assert commit_order(pts, ctx) == ([2, 3, 0], "author_date")
    # the author dates decide, across time zones: b (00:00+01:00) is before c (00:00Z)
    ctx[2] = PointContext(_src("b", "2026-01-02T00:30:00+01:00", None), {})
    assert commit_order(pts, ctx) == ([2, 3, 0], "author_date")


def test_source_of_takes_only_a_40_hex_commit():
    good = {"source": {"location": "x", "ref": "main", "commit": "A" * 40, "dirty_hash": "d1", "subject": "s",
                       "author_date": "2026-01-01T00:00:00+00:00", "commit_index": 3}}
    s = source_of(good)
    assert s is not None and s.commit == "a" * 40 and s.short == "aaaaaaa+dirty" and s.commit_index == 3
    assert source_of({"source": {**good["source"], "commit": "g" * 40}}) is None
    assert source_of({"source": {**good["source"], "commit": "a" * 39}}) is None
    assert source_of({}) is None and source_of(None) is None


def test_fact_diff_names_exactly_the_keys_that_differ():
    env = {"kernel": "6.1.0", "cpu_model": "X", "cores": 2, "cpu_governor": ["performance"], "backend": "local",
           "xferlab_version": "0.1", "sysctls": {"net.core.somaxconn": "4096", "fs.file-max": "100"}}
    a = facts_of(env, {"image_id": "sha256:1"}, "h1")
    b = facts_of({**env, "cpu_governor": ["powersave"], "sysctls": {**env["sysctls"], "fs.file-max": "200"}},
                 {"image_id": "sha256:2"}, "h1")
    assert [(d.name, d.before, d.after) for d in fact_diff(a, b)] == [
        ("cpu_governor", "performance", "powersave"), ("image", "sha256:1", "sha256:2"),
        ("sysctl fs.file-max", "100", "200")]
    assert fact_diff(a, a) == [] and fact_diff(a, None) == []


def _move_environment(engine, cid: int) -> dict:
    """Give campaign ``cid``'s cells an environment whose kernel and net.core.somaxconn
    differ from the one they ran in (class recomputed), through the store's path."""
    from runner.metrics.environment import environment_class
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Environment, SeriesPoint
    from runner.store.points import refresh_points

    with Session(engine, expire_on_commit=False) as s:
        cells = list(s.query(Cell).filter(Cell.campaign_id == cid))
        data = dict(s.get(Environment, cells[0].environment_id).data)
        data["kernel"] = data["kernel"] + "-moved"
        data["sysctls"] = {**data["sysctls"], "net.core.somaxconn": "77"}
        env = crud.get_or_create_environment(s, data=data, env_class=environment_class(data))
        for c in cells:
            c.environment_id = env.id
        s.flush()
        for c in cells:
            refresh_points(s, cell=c)
        s.commit()
        assert {p.env_class for p in s.query(SeriesPoint).filter(SeriesPoint.campaign_id == cid)} == {env.env_class}
        return data


@pytest.mark.integration
@pytest.mark.timeout(900)
@skip_if_problem(linknet.base_problem(), machine=not_root())
def test_history_by_commit_orders_names_the_slow_commit_and_shows_what_moved(engine, xferlab_env):
    from runner.store.models import Cell, ServerBuild

    history = commits(7, first_slow=3)
    run_order = [2, 0, 5, 1, 4, 3, 6]  # campaign (time) order differs from commit order
    cids = {i: run_commit_campaign(engine, history[i]) for i in run_order}
    _move_environment(engine, cids[6])

    p = subprocess.run(XFERLAB + ["history", "tpd:retr", "--track", LABEL, "--by", "commit", "--json"],
                       env=xferlab_env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["order"] == "commit_index" and got["left_out"] == 0
    assert [pt["source"]["commit"] for pt in got["points"]] == [c.sha for c in history]
    assert [pt["campaign_id"] for pt in got["points"]] == [cids[i] for i in range(7)]
    medians = [pt["median"] for pt in got["points"]]
    print("medians by commit (MiB/s):", [round(m) for m in medians])
    changes = got["changes"]
    step = changes[2]  # between commit 2 and commit 3
    assert step["kind"] == "regression" and step["first_commit"]["commit"] == history[3].sha
    assert step["first_commit"]["subject"] == history[3].subject
    assert step["effect"] > 0.05
    regressions = [i for i, c in enumerate(changes) if c["kind"] == "regression"]
    assert regressions[0] == 2 and max(changes, key=lambda c: c["effect"] or 0) is step
    assert changes[5]["kind"] == "env_changed"
    assert all(c["kind"] != "env_changed" for c in changes[:5])

    # the facts that differ, against the stored build rows and environment: the config hash
    # at the slow commit (its variant changed), kernel and somaxconn at the moved environment
    with Session(engine) as s:
        def chash(cid):
            return s.get(ServerBuild, s.query(Cell).filter(Cell.campaign_id == cid).first().build_id).config_hash
        step_expect = [("config_hash", chash(cids[2]), chash(cids[3]))] if chash(cids[2]) != chash(cids[3]) else []
    assert [(d["name"], d["before"], d["after"]) for d in step["env_diff"]] == step_expect
    moved = changes[5]["env_diff"]
    assert [d["name"] for d in moved] == ["kernel", "sysctl net.core.somaxconn"]
    assert moved[0]["after"] == moved[0]["before"] + "-moved" and moved[1]["after"] == "77"
    assert all(c["env_diff"] == [] for i, c in enumerate(changes) if i not in (2, 5))

    text = subprocess.run(XFERLAB + ["history", "tpd:retr", "--track", LABEL, "--by", "commit"],
                          env=xferlab_env, capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    print(text.stdout)
    lines = [ln for ln in text.stdout.splitlines() if ln.startswith("  ") and not ln.startswith("   ")]
    assert [ln.split()[0] for ln in lines] == [c.sha[:7] for c in history]
    assert f"first commit after the change: {history[3].sha[:7]} {history[3].subject}" in text.stdout
    assert "environment moved: kernel: " in text.stdout and "sysctl net.core.somaxconn: " in text.stdout

    by_time = subprocess.run(XFERLAB + ["history", "tpd:retr", "--track", LABEL], env=xferlab_env,
                             capture_output=True, text=True, timeout=120)
    assert by_time.returncode == 0, by_time.stderr
    rows = [ln.split()[0] for ln in by_time.stdout.splitlines() if ln.startswith("  #")]
    assert rows == [f"#{cids[i]}" for i in sorted(cids, key=lambda i: cids[i])]  # campaign order
    assert "environment moved: kernel: " in by_time.stdout

    reg = subprocess.run(XFERLAB + ["regressions"], env=xferlab_env, capture_output=True, text=True, timeout=120)
    assert reg.returncode == 0, reg.stderr
    print(reg.stdout)
    assert "environment moved: kernel: " in reg.stdout
