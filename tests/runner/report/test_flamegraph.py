"""Flame graphs of real profiles drawn by inferno (runner.report.flamegraph): the frames'
samples and percentages equal those counted from the folded stacks, the differential
graph's changes equal the change of each frame's share, red for growth and blue for
shrinkage; a missing inferno is named with its fix."""
from __future__ import annotations

import pytest

from tests.support.real_profile import frame_samples, record, svg_frames


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("perf")
    return {"a": record(d, "a")[0], "b": record(d, "b")[0]}


def _frame(frames, name):
    found = [f for f in frames if f["name"] == name]
    assert len(found) == 1, (name, [f["name"] for f in frames])
    return found[0]


def test_flamegraph_frames_match_the_folded_stacks(profiles):
    from runner.report.flamegraph import flamegraph_svg, folded_total

    p = profiles["a"]
    svg = flamegraph_svg(p.on_cpu, title="busy <a> & 'b'", subtitle="perf at 199 Hz")
    frames = svg_frames(svg)
    total = folded_total(p.on_cpu)
    assert _frame(frames, "all")["samples"] == total
    for name in ("xfl_hash_block", "xfl_work", "main"):
        hit, all_ = frame_samples(p.on_cpu, name)
        f = _frame(frames, name)
        assert all_ == total and f["samples"] == hit > 0
        assert abs(f["pct"] - 100 * hit / total) <= 0.005 + 1e-9, (name, f, hit, total)
    assert "busy &lt;a&gt; &amp;" in svg  # the title escaped as text
    assert "<script" in svg and "init(evt)" in svg  # inferno's interactive part


def _self_samples(folded: str, frame: str) -> tuple[int, int]:
    """``(samples whose stack ends in ``frame``, all samples)``."""
    total = hit = 0
    for line in folded.splitlines():
        stack, _, n = line.rpartition(" ")
        total += int(n)
        hit += int(n) if stack.split(";")[-1] == frame else 0
    return hit, total


def test_differential_graph_measures_the_change_of_share(profiles):
    """a (hash-heavy) -> b (copy-heavy): the frames are sized by b; xfl_hash_block's self
    share falls (blue), xfl_copy_block's rises (red). A frame's change is that of its self
    samples (the stacks ending in it, as Gregg's flamegraph.pl and inferno colour them), in
    percentage points of b's total: it equals the self-share difference counted from the
    folded text, within what ``--normalize`` loses making a's scaled count of a stack a whole
    number (under one sample of b's total) and the two decimals shown."""
    from runner.report.flamegraph import diff_svg

    a, b = profiles["a"].on_cpu, profiles["b"].on_cpu
    frames = svg_frames(diff_svg(a, b, title="a -> b"))
    for name, sign in (("xfl_hash_block", -1), ("xfl_copy_block", +1)):
        hb = frame_samples(b, name)[0]
        sa, ta = _self_samples(a, name)
        sb, tb = _self_samples(b, name)
        expected = 100 * (sb / tb - sa / ta)
        f = _frame(frames, name)
        assert f["samples"] == hb  # the shape is the second profile's
        tolerance = 0.005 + 1 / tb * 100
        assert f["delta"] is not None and abs(f["delta"] - expected) <= tolerance, (name, f, expected, tolerance)
        assert expected * sign > 5, (name, expected)  # the modes differ 4:1 the other way round
        r, _, bl = (int(v) for v in f["fill"].removeprefix("rgb(").removesuffix(")").split(","))
        assert (r > bl) if sign > 0 else (bl > r), (name, f["fill"])


def test_no_samples_and_missing_inferno_are_named(monkeypatch, tmp_path):
    from runner.report import flamegraph

    with pytest.raises(ValueError, match="no samples"):
        flamegraph.flamegraph_svg("", title="x")
    with pytest.raises(ValueError, match="both sides"):
        flamegraph.diff_svg("a;b 1\n", "", title="x")
    monkeypatch.setattr(flamegraph.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(flamegraph.InfernoMissing, match=r"inferno-flamegraph is not installed: run `make install`"):
        flamegraph.flamegraph_svg("a;b 1\n", title="x")


def test_two_servers_are_aligned_below_their_root_frame():
    """Stacks of two different programs share nothing while their process names head them;
    with the common root, the same library and kernel frames merge and only their counts
    differ (the same stack of two processes of one side added up)."""
    from runner.report.profile_pairs import COMMON_ROOT, common_root

    a = "proftpd;main;xcrypt_r 30\nproftpd;main;[k] do_sys_open 10\nproftpd-helper;main;xcrypt_r 2\n"
    b = "pure-ftpd;main;xcrypt_r 40\npure-ftpd;[k] fork 12\n"
    ca, cb = common_root(a), common_root(b)
    assert ca == f"{COMMON_ROOT};main;[k] do_sys_open 10\n{COMMON_ROOT};main;xcrypt_r 32\n"
    assert cb == f"{COMMON_ROOT};[k] fork 12\n{COMMON_ROOT};main;xcrypt_r 40\n"
    stacks = lambda t: {line.rpartition(" ")[0] for line in t.splitlines()}  # noqa: E731
    assert not stacks(a) & stacks(b) and stacks(ca) & stacks(cb) == {f"{COMMON_ROOT};main;xcrypt_r"}
