"""runner.metrics.cgroup: finding a process's memory cgroup and reading it, on synthetic
v1/v2 trees in a tmp dir and on this machine's real tree."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.metrics.cgroup import cgroup_dir, from_engine_stats, read_cgroup_memory
from tests.support.fake_proc import fake_proc
from tests.support.skips import machine_lacks


def test_v1_tree(tmp_path: Path):
    root = tmp_path / "cg"
    d = root / "memory" / "docker" / "abc"
    d.mkdir(parents=True)
    (d / "memory.usage_in_bytes").write_text("3000\n")
    (d / "memory.max_usage_in_bytes").write_text("5000\n")
    (d / "memory.stat").write_text("cache 1000\nrss 1500\ntotal_rss 2000\n")
    proc = fake_proc(tmp_path, 42, "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n")
    assert cgroup_dir(42, root, proc) == (d, 1)
    assert read_cgroup_memory(d, 1) == {"current": 3000.0, "peak": 5000.0, "anon": 2000.0}


def test_v2_tree_and_hybrid_layout(tmp_path: Path):
    root = tmp_path / "cg"
    d = root / "system.slice" / "docker-abc.scope"
    d.mkdir(parents=True)
    (d / "memory.current").write_text("4096\n")
    (d / "memory.stat").write_text("anon 1024\nfile 2048\n")
    proc = fake_proc(tmp_path, 7, "0::/system.slice/docker-abc.scope\n")
    assert cgroup_dir(7, root, proc) == (d, 2)
    assert read_cgroup_memory(d, 2) == {"current": 4096.0, "anon": 1024.0}  # no memory.peak: none
    (d / "memory.peak").write_text("8192\n")
    assert read_cgroup_memory(d, 2)["peak"] == 8192.0
    hybrid = tmp_path / "hy"
    u = hybrid / "unified" / "system.slice" / "docker-abc.scope"
    u.mkdir(parents=True)
    (u / "memory.current").write_text("1\n")
    assert cgroup_dir(7, hybrid, proc) == (u, 2)


def test_not_found(tmp_path: Path):
    proc = fake_proc(tmp_path, 9, "4:memory:/gone\n0::/gone\n")
    assert cgroup_dir(9, tmp_path / "cg", proc) is None
    assert cgroup_dir(10, tmp_path / "cg", proc) is None  # no such process
    with pytest.raises(OSError):
        read_cgroup_memory(tmp_path / "cg" / "gone", 2)
    with pytest.raises(ValueError, match="want 1 or 2"):
        read_cgroup_memory(tmp_path, 3)


def test_engine_stats():
    assert from_engine_stats({"usage": 10, "max_usage": 20, "stats": {"total_rss": 5, "rss": 4}}) == \
        {"current": 10.0, "peak": 20.0, "anon": 5.0}
    assert from_engine_stats({"usage": 10, "stats": {"anon": 3}}) == {"current": 10.0, "anon": 3.0}
    assert from_engine_stats({}) == {}


def test_this_process_for_real():
    """This process's own memory cgroup, where the host exposes one: figures in bytes
    that cover at least this process's anonymous memory (a 64 MiB buffer held now)."""
    found = cgroup_dir(os.getpid())
    if found is None:
        machine_lacks("a memory cgroup of this process visible under /sys/fs/cgroup")
    buf = bytearray(os.urandom(1)) * (64 << 20)  # touched: counts as anonymous memory
    mem = read_cgroup_memory(*found)
    assert mem["anon"] >= len(buf) and mem["current"] >= mem["anon"]
    if "peak" in mem:
        assert mem["peak"] >= mem["current"]
    del buf
