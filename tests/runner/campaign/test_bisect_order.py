"""The bisected range in the repository's order (runner.campaign.bisect.repo_order), the
x-axis of the dashboard's bisect chart and the order of ``xferlab bisect``'s summary: on
repositories made here, a linear one (the order is the order the commits were made) and
one with a merged side branch (every commit of ``good..bad`` on the axis, each after its
parents); and the steps placed on it (in_repo_order)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runner.campaign import bisect
from runner.campaign.bisect import BisectError, Step, in_repo_order, repo_order

ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@e"}


def _git(path: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=path, env=ENV, check=True, capture_output=True,
                          text=True).stdout.strip()


def _commit(path: Path, name: str) -> str:
    (path / name).write_text(f"{name}\n")
    _git(path, "add", name)
    _git(path, "commit", "-qm", name)
    return _git(path, "rev-parse", "HEAD")


def _linear(path: Path, n: int) -> list[str]:
    _git(path.parent, "init", "-q", "-b", "main", str(path))
    return [_commit(path, f"c{i}") for i in range(n)]


def test_a_linear_range_is_in_the_order_its_commits_were_made(tmp_path):
    c = _linear(tmp_path / "r", 8)
    assert repo_order(tmp_path / "r", c[0], c[7]) == c
    assert repo_order(tmp_path / "r", c[2], c[5]) == c[2:6]


def test_a_merged_side_branch_is_on_the_axis_each_commit_after_its_parents(tmp_path):
    r = tmp_path / "r"
    g, a = _linear(r, 2)
    _git(r, "checkout", "-q", "-b", "side")
    b1, b2 = _commit(r, "b1"), _commit(r, "b2")
    _git(r, "checkout", "-q", "main")
    c = _commit(r, "c")
    _git(r, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    m = _git(r, "rev-parse", "HEAD")
    d = _commit(r, "d")
    order = repo_order(r, g, d)
    assert order[0] == g and order[-1] == d and sorted(order) == sorted([g, a, b1, b2, c, m, d])
    parents = {x: _git(r, "rev-list", "--parents", "-n", "1", x).split()[1:] for x in order}
    assert parents[m] == [c, b2]
    for i, x in enumerate(order):  # a parent in the range always comes before its child
        for p in parents[x]:
            if p in order:
                assert order.index(p) < i, (x, p, order)


def test_a_range_over_the_bound_is_refused(tmp_path, monkeypatch):
    c = _linear(tmp_path / "r", 6)
    monkeypatch.setattr(bisect, "MAX_RANGE", 4)
    with pytest.raises(BisectError, match="5 commits between good and bad: at most 4"):
        repo_order(tmp_path / "r", c[0], c[5])
    assert len(repo_order(tmp_path / "r", c[1], c[5])) == 5


def _step(role: str, commit: str, verdict: str = "good") -> Step:
    return Step(role, commit, "", [1], 1.0, verdict)  # type: ignore[arg-type]


def test_steps_are_placed_on_the_axis_a_confirmation_after_its_step():
    c = [f"{i:040x}" for i in range(8)]
    outside = "f" * 40  # a first parent that is an ancestor of the good end, off the range
    measured = [_step("good", c[0]), _step("bad", c[7], "bad"), _step("step", c[3]), _step("step", c[5], "bad"),
                _step("step", c[4]), _step("confirm", outside), _step("confirm", c[4])]
    placed = in_repo_order(c, measured)
    assert [pos for pos, _st in placed] == [-1, 0, 3, 4, 4, 5, 7]
    assert [st.role for _pos, st in placed] == ["confirm", "good", "step", "step", "confirm", "step", "bad"]
    assert in_repo_order(c, []) == []
