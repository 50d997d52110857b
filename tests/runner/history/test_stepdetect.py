"""The step detector (runner.history.changepoint) and the regression verdicts of
runner.history on synthetic series (no database).

Stated bound (also in docs/methodology.md): on 1,000 seeded pure-noise series the
detector reports a step in at most 1% of them (measured: 0 of 1,000 for Gaussian and
for Laplace noise, 20-60 points), and the full verdict (steps + newest point, Mann-Whitney
U, Benjamini-Hochberg, 5% minimum effect) flags at most 1% of the series.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

from runner.history import Point, SeriesKey, changepoint, series_changes
from runner.history.changepoint import detect_steps, detect_steps_many, segment_costs, step_indices
from runner.report.stats import summarize

FP_BOUND = 0.01  # at most 1% of pure-noise series with a reported step


def test_segment_costs_match_brute_force():
    rng = np.random.default_rng(7)
    for m in (1, 2, 3, 8, 31):
        y = rng.normal(size=m).round(1)  # rounded: ties included
        c = segment_costs(y)
        for lo in range(m):
            for hi in range(lo, m):
                w = y[lo:hi + 1]
                assert c[lo, hi] == pytest.approx(np.abs(w - np.median(w)).sum(), abs=1e-9)
        assert np.isinf(c[np.tril_indices(m, -1)]).all()


@pytest.mark.parametrize("levels,lengths", [
    ((100, 85), (20, 15)),           # one regression (throughput drops 15%)
    ((100, 110, 95), (12, 10, 8)),   # up then down
    ((50, 60, 60.0, 45), (5, 6, 0, 9)),  # short first segment
    ((1000, 800, 1000), (30, 3, 30)),  # a 3-campaign dip in the middle
])
def test_known_change_points_found_with_position_and_direction(levels, lengths):
    rng = np.random.default_rng(sum(lengths))
    y = np.concatenate([np.full(n, lv) for lv, n in zip(levels, lengths) if n])
    want_levels = [lv for lv, n in zip(levels, lengths) if n]
    y = y * rng.normal(1, 0.01, y.size)  # 1% noise
    segs = detect_steps(y)
    want_steps = list(np.cumsum([n for n in lengths if n])[:-1])
    assert step_indices(segs) == want_steps
    for seg, lv in zip(segs, want_levels):
        assert seg.level == pytest.approx(lv, rel=0.02)
    # direction of each step
    got_dirs = [np.sign(b.level - a.level) for a, b in zip(segs, segs[1:])]
    assert got_dirs == [np.sign(b - a) for a, b in zip(want_levels, want_levels[1:])]


def test_one_outlier_campaign_is_not_two_steps_unless_large():
    y = np.full(30, 100.0) * np.random.default_rng(1).normal(1, 0.01, 30)
    y[15] = 103.0  # 3% off for one campaign, 3 sigma: not a level change
    assert step_indices(detect_steps(y)) == []


@pytest.mark.parametrize("noise", ["gauss", "laplace"])
def test_false_positive_rate_on_1000_noise_series(noise):
    rng = np.random.default_rng(20261123 if noise == "gauss" else 99)
    hits = 0
    for _ in range(1000):
        m = int(rng.integers(20, 61))
        # each point: the median of 5 repeats, 2% noise per repeat
        reps = rng.normal(100, 2, (m, 5)) if noise == "gauss" else rng.laplace(100, 2, (m, 5))
        hits += len(detect_steps(np.median(reps, axis=1))) > 1
    assert hits / 1000 <= FP_BOUND, f"{hits} of 1000 {noise} noise series got a step"


def test_detector_input_errors():
    with pytest.raises(ValueError, match="empty"):
        detect_steps([])
    with pytest.raises(ValueError, match="NaN"):
        detect_steps([1.0, float("nan")])
    with pytest.raises(ValueError, match="penalty"):
        detect_steps([1.0, 2.0], penalty=0)
    assert [(s.start, s.end) for s in detect_steps([5.0])] == [(0, 1)]
    assert [(s.start, s.end) for s in detect_steps([5.0] * 10)] == [(0, 10)]


def test_fitting_many_series_at_once_gives_each_its_own_fit(monkeypatch):
    """detect_steps_many: the fit of each series equals detect_steps' on it alone, bit for
    bit, whatever the mix of lengths and however the series are batched."""
    rnd = random.Random(11)
    ys = []
    for i in range(120):
        m = rnd.choice([1, 2, 3, 7, 20, 50])
        step = rnd.choice([None, m // 2, m - 1])
        ys.append([(130.0 if step is not None and j >= step else 100.0) * rnd.gauss(1, 0.02) if i % 3 else
                   float(round(rnd.gauss(10, 1))) for j in range(m)])  # every third: integers, with ties
    alone = [detect_steps(y) for y in ys]
    assert detect_steps_many(ys) == alone
    for y, segs in zip(ys, alone):  # each level is numpy's median of its segment, exactly
        assert [s.level for s in segs] == [float(np.median(y[s.start:s.end])) for s in segs]
    assert sum(len(s) > 1 for s in alone) > 20  # steps were found, not only flat fits
    monkeypatch.setattr(changepoint, "BATCH_CELLS", 1000)  # a few series per batch
    assert detect_steps_many(ys) == alone
    assert detect_steps_many([]) == []
    with pytest.raises(ValueError, match="series 1: .*NaN"):
        detect_steps_many([[1.0, 2.0], [1.0, float("nan")]])


KEY = SeriesKey("pyftpdlib", "{}", "retr", "duration=3")


def _points(repeats_per_point: list[list[float]], env=None) -> list[Point]:
    return [Point(i + 1, f"c{i + 1}", None, "2.2.0", "pyftpdlib", (env or {}).get(i, "envA"), "MiB/s", list(r),
                  summarize(list(r))) for i, r in enumerate(repeats_per_point)]


def test_campaign_to_campaign_jitter_is_not_a_regression():
    """Medians alternate 1000 <-> 1060 (6%) from campaign to campaign with tight repeats.
    The old pair rule called 6 of these 7 pairs significant (p = 0.029 each, 6% >= 5%);
    there is no lasting level change, and the newest point is at the usual level."""
    pts = _points([[v, v + 1, v - 1, v + 2] for v in (1000, 1060, 1000, 1060, 1000, 1060, 1000, 1000)])
    changes = series_changes(KEY, pts)
    assert len(changes) == 7
    assert [c.kind for c in changes] == ["same"] * 7


def test_step_then_latest_in_series_changes():
    base = [[1000, 1005, 995, 1002]] * 6
    low = [[800, 805, 795, 802]] * 5
    pts = _points(base + low + [[640, 645, 635, 642]])  # a step at 6, then the newest point 20% lower again
    changes = series_changes(KEY, pts)
    got = {i: (c.kind, c.method) for i, c in enumerate(changes) if c.method}
    # the newest point is a candidate either way (here the noise-free medians make it a step too)
    assert got.keys() == {5, 10} and got[5] == ("regression", "step") and got[10][0] == "regression"
    two = series_changes(KEY, _points(base[:1] + low[:1]))  # two points: the newest-point rule alone
    assert [(c.kind, c.method) for c in two] == [("regression", "latest")]
    step = changes[5]
    assert (step.level_before, step.level_after, step.points_before, step.points_after) == (1001.0, 801.0, 6, 5)
    assert step.effect == pytest.approx(1001 / 801 - 1) and step.q_value >= step.p_value
    # environment change: not compared, and the detector runs on each side separately
    pts = _points(base + low, env={i: "envB" for i in range(6, 11)})
    kinds = [c.kind for c in series_changes(KEY, pts)]
    assert kinds[5] == "env_changed" and set(kinds) - {"env_changed"} == {"same"}


def test_full_verdict_false_positive_rate_on_noise():
    rnd = random.Random(5)
    flagged = 0
    for _ in range(1000):
        m = rnd.randint(2, 20)
        pts = _points([[rnd.gauss(1000, 20) for _ in range(5)] for _ in range(m)])
        flagged += any(c.significant for c in series_changes(KEY, pts))
    assert flagged / 1000 <= FP_BOUND, f"{flagged} of 1000 noise series flagged"
