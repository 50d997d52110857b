"""git's bisect order as ``xferlab bisect`` walks it (runner.campaign.bisect.bisect_steps),
on a linear repository of 8 commits made here: the midpoint, the range shrinking to the
first bad commit, and a skipped commit replaced by git's next best."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from runner.campaign.bisect import bisect_steps


def _repo(path: Path, n: int) -> list[str]:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    shas = []
    for i in range(n):
        (path / "f").write_text(f"{i}\n")
        subprocess.run(["git", "add", "f"], cwd=path, check=True, env=env)
        subprocess.run(["git", "commit", "-qm", f"c{i}"], cwd=path, check=True, env=env)
        shas.append(subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True,
                                   check=True).stdout.strip())
    return shas


def test_bisect_walks_to_the_first_bad_commit(tmp_path):
    c = _repo(tmp_path, 8)  # c0 good ... c7 bad; the regression is c5
    first_bad = 5
    goods, bad, tested = [c[0]], c[7], []
    while True:
        mid, left, steps = bisect_steps(tmp_path, bad, goods)
        if mid is None:
            break
        assert left == len(set(c) & set(c[c.index(goods[-1]) + 1:c.index(bad) + 1])) and steps >= 0
        tested.append(c.index(mid))
        if c.index(mid) >= first_bad:
            bad = mid
        else:
            goods.append(mid)
    assert bad == c[first_bad]
    assert tested[0] in (3, 4) and len(tested) == 3  # halving 7 commits: about log2(7) steps


def test_a_skipped_commit_is_replaced_by_gits_next_best(tmp_path):
    c = _repo(tmp_path, 8)
    mid, left, _ = bisect_steps(tmp_path, c[7], [c[0]])
    assert left == 7
    other, left2, _ = bisect_steps(tmp_path, c[7], [c[0]], frozenset({mid}))
    assert other not in (None, mid, c[7]) and left2 == 7
    assert abs(c.index(other) - c.index(mid)) == 1  # the next most even split is a neighbour
    # every commit but the bad one skipped: nothing left to test
    rest = frozenset(c[1:7])
    assert bisect_steps(tmp_path, c[7], [c[0]], rest)[0] is None
