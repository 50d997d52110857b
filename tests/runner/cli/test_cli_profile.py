"""``xferlab profile CELL_ID`` and ``xferlab compare A B --profile`` on real profiles
(tests/support/real_profile.py) stored as a run stores them: the files written, the SVGs
parsed as XML with the program's frames, their samples and percentages; the differential
SVG of two campaigns; clear errors for an unprofiled cell."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.real_profile import frame_samples, record, store_profiled_campaign, svg_frames


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("perf")
    return {"a": record(d, "a")[0], "b": record(d, "b")[0]}


def _cli(args: list[str], env: dict, *, ok: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "runner.cli", *args], env=env, capture_output=True, text=True,
                       timeout=120, check=False)
    assert (p.returncode == 0) == ok, (p.returncode, p.stderr)
    return p


def test_profile_writes_svg_folded_and_syscalls(engine, xferlab_env, profiles, tmp_path):
    pa = profiles["a"]
    _, ids = store_profiled_campaign(engine, {"hash-heavy": pa, "plain": None})
    cell = ids["hash-heavy"]
    out = tmp_path / "out"
    _cli(["profile", str(cell), "-o", str(out)], xferlab_env)
    assert sorted(p.name for p in out.iterdir()) == [f"cell-{cell}-syscalls.txt", f"cell-{cell}.folded",
                                                     f"cell-{cell}.svg"]
    assert (out / f"cell-{cell}.folded").read_text() == pa.on_cpu
    frames = svg_frames((out / f"cell-{cell}.svg").read_text())
    total = sum(int(line.rpartition(" ")[2]) for line in pa.on_cpu.splitlines())
    for name in ("main", "xfl_work", "xfl_hash_block"):
        hit, _ = frame_samples(pa.on_cpu, name)
        f = next(f for f in frames if f["name"] == name)
        assert f["samples"] == hit and abs(f["pct"] - 100 * hit / total) <= 0.005 + 1e-9
    text = (out / f"cell-{cell}-syscalls.txt").read_text()
    assert f"profiler: perf {pa.profiler_version} at {pa.rate_hz} Hz" in text
    assert any(line.split()[:2] == ["write", str(pa.syscalls[0].count)] for line in text.splitlines()), text
    p = _cli(["profile", str(ids["plain"]), "-o", str(out)], xferlab_env, ok=False)
    assert f"cell {ids['plain']} (plain · login, done) has no profile" in p.stderr
    p = _cli(["profile", "999999", "-o", str(out)], xferlab_env, ok=False)
    assert "no cell 999999" in p.stderr


def test_compare_profile_writes_the_differential_svg(engine, xferlab_env, profiles, tmp_path):
    """Two campaigns of the same server label, one hash-heavy, one copy-heavy: the login
    workload was profiled on both, so one differential SVG, sized by the second side, with
    xfl_copy_block's share grown (+) and xfl_hash_block's shrunk (-)."""
    before, _ = store_profiled_campaign(engine, {"srv": profiles["a"]}, name="before")
    after, _ = store_profiled_campaign(engine, {"srv": profiles["b"]}, name="after")
    out = tmp_path / "diff"
    p = _cli(["compare", f"{before}:srv", f"{after}:srv", "--profile", "--profile-dir", str(out)], xferlab_env)
    files = sorted(out.iterdir())
    assert [f.name for f in files] == ["profile-diff-login-1.svg"], files
    assert "samples vs" in p.stderr
    frames = svg_frames(files[0].read_text())
    copy = next(f for f in frames if f["name"] == "xfl_copy_block")
    hashing = next(f for f in frames if f["name"] == "xfl_hash_block")
    assert copy["samples"] == frame_samples(profiles["b"].on_cpu, "xfl_copy_block")[0]
    assert copy["delta"] > 5 and hashing["delta"] < -5, (copy, hashing)
    plain, _ = store_profiled_campaign(engine, {"srv": None}, name="plain")
    p = _cli(["compare", f"{before}:srv", f"{plain}:srv", "--profile", "--profile-dir", str(out)], xferlab_env,
             ok=False)
    assert "was profiled on both sides" in p.stderr
