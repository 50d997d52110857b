"""runner.metrics.cgroup_cpu and runner.metrics.server_cgroup: finding and reading a
cgroup's CPU counters on synthetic v1/v2/hybrid trees, and, for real, a forking server
in a cgroup the lab made, whose workers burn a known CPU time and exit unwaited-for: the
cgroup figure matches the burn, the process-tree figure does not."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.backends.local.process import make_preexec
from runner.cell.server_cpu import phase_cpu
from runner.metrics import server_cgroup
from runner.metrics.cgroup_cpu import (
    V1_CPUACCT_MOUNTS,
    CpuCgroup,
    CpuStat,
    cpu_cgroup,
    from_engine_cpu_stats,
    v2_root,
)
from runner.metrics.sampler import TreeSampler
from tests.support.fake_proc import fake_proc
from tests.support.skips import machine_lacks
from tests.support.waiting import wait_for

SCRIPT = Path(__file__).resolve().parents[2] / "support" / "forking_server.py"
WORKERS = 4
BURN_S = 0.25


def test_v2_cpu_stat(tmp_path: Path):
    root = tmp_path / "cg"
    (root).mkdir()
    for f in ("cgroup.procs", "cgroup.controllers"):
        (root / f).write_text("")
    d = root / "system.slice" / "docker-abc.scope"
    d.mkdir(parents=True)
    (d / "cgroup.procs").write_text("7\n")
    (d / "cpu.stat").write_text("usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 9\n"
                                "nr_throttled 3\nthrottled_usec 250\n")
    proc = fake_proc(tmp_path, 7, "0::/system.slice/docker-abc.scope\n")
    cg = cpu_cgroup(7, root, proc)
    assert cg == CpuCgroup(d, 2, None)
    assert cg.read() == CpuStat(1500, 1000, 500, 3, 250, str(d))
    assert v2_root(root) == root
    # the root cgroup counts the whole machine: never taken as a server's
    assert cpu_cgroup(8, root, fake_proc(tmp_path / "b", 8, "0::/\n")) is None


def test_v1_and_hybrid(tmp_path: Path):
    root = tmp_path / "cg"
    acct = root / "cpuacct" / "docker" / "abc"
    cpu = root / "cpu" / "docker" / "abc"
    for d in (acct, cpu):
        d.mkdir(parents=True)
    (acct / "cpuacct.usage").write_text("3000000\n")
    # the per-mode counters are tick samples (0.9 ms of the 3 ms here, a third of it user):
    # their share splits the exact usage
    (acct / "cpuacct.usage_user").write_text("300000\n")
    (acct / "cpuacct.usage_sys").write_text("600000\n")
    (acct / "cpuacct.stat").write_text("user 40\nsystem 20\n")  # USER_HZ ticks: for kernels without them
    (cpu / "cpu.shares").write_text("1024\n")
    (cpu / "cpu.stat").write_text("nr_periods 4\nnr_throttled 2\nthrottled_time 5000000\n")
    text = "2:cpuacct:/docker/abc\n1:cpu:/docker/abc\n0::/\n"
    cg = cpu_cgroup(5, root, fake_proc(tmp_path, 5, text))
    assert cg == CpuCgroup(acct, 1, cpu)
    assert cg.read() == CpuStat(3000, 1000, 2000, 2, 5000, str(acct))
    for f in ("cpuacct.usage_user", "cpuacct.usage_sys"):  # an older kernel: cpuacct.stat's ticks
        (acct / f).unlink()
    assert cg.read() == CpuStat(3000, 2000, 1000, 2, 5000, str(acct))
    (acct / "cpuacct.usage_user").write_text("2000000\n")
    (acct / "cpuacct.usage_sys").write_text("1000000\n")
    # hybrid: the container is in the v2 hierarchy too; usage from there, throttling from v1
    u = root / "unified" / "docker" / "abc"
    u.mkdir(parents=True)
    (u / "cgroup.procs").write_text("5\n")
    (u / "cpu.stat").write_text("usage_usec 3100\nuser_usec 2100\nsystem_usec 1000\n")
    cg = cpu_cgroup(5, root, fake_proc(tmp_path / "h", 5, text.replace("0::/", "0::/docker/abc")))
    assert cg == CpuCgroup(u, 2, cpu)
    assert cg.read() == CpuStat(3100, 2100, 1000, 2, 5000, str(u))
    assert CpuStat(3100, 2100, 1000, 2, 5000).since(CpuStat(100, 100, 0, 1, 0)) == CpuStat(3000, 2000, 1000, 1, 5000)
    assert cpu_cgroup(6, root, tmp_path / "proc") is None  # no such process


def test_engine_cpu_stats():
    stats = {"cpu_usage": {"total_usage": 3_000_000, "usage_in_usermode": 2_000_000, "usage_in_kernelmode": 1_000_000},
             "throttling_data": {"periods": 9, "throttled_periods": 2, "throttled_time": 7_000_000}}
    assert from_engine_cpu_stats(stats) == CpuStat(3000, 2000, 1000, 2, 7000, "engine")
    assert from_engine_cpu_stats({}) is None


def test_no_cgroup_says_why(tmp_path: Path):
    (tmp_path / "cpu").mkdir()  # a v1 layout without cpuacct
    with pytest.raises(server_cgroup.NoServerCgroup,
                       match="no cgroup v2 hierarchy .*; no cgroup v1 cpuacct hierarchy"):
        server_cgroup.make(tmp_path)


def _v1_only_root(tmp_path: Path) -> Path:
    """A cgroup root that shows only the host's v1 ``cpuacct`` hierarchy (a symlink to it):
    server_cgroup.make() finds no v2 there and makes a real v1 cgroup."""
    host = Path("/sys/fs/cgroup")
    v1 = next((host / m for m in V1_CPUACCT_MOUNTS if (host / m / "cpuacct.usage").exists()), None)
    if v1 is None:
        machine_lacks("a cgroup v1 cpuacct hierarchy (a v2-only host)")
    root = tmp_path / "v1root"
    root.mkdir()
    (root / v1.name).symlink_to(v1)
    return root


@pytest.mark.parametrize("version", [2, 1])
def test_forking_server_cgroup_counts_the_workers_the_tree_loses(tmp_path: Path, version: int):
    """Four workers each burn 0.25 s of CPU and exit after their session process exited
    unwaited-for. The cgroup's usage over the phase is the 1.0 s burnt plus the forks'
    and the listener's small cost (upper bound: 0.05 s per worker + 0.1 s); the
    process-tree figure sees at most a quarter of it (the listener and its reaped session
    processes only). Version 2: the cgroup make() picks on this host; version 1: one made
    in the v1 ``cpuacct`` hierarchy (cpuacct.usage*, nanoseconds)."""
    try:
        cg = server_cgroup.make(_v1_only_root(tmp_path) if version == 1 else None)
    except server_cgroup.NoServerCgroup as e:
        machine_lacks(f"a cgroup v{version} this process can make: {e}")
    if version == 2 and cg.cpu.version != 2:
        cg.remove()
        machine_lacks("a cgroup v2 hierarchy (a v1-only host)")
    assert cg.cpu.version == version
    fifo, out = tmp_path / "fifo", tmp_path / "out"
    os.mkfifo(fifo)
    out.mkdir()
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(fifo), str(out), str(BURN_S)],
                            preexec_fn=make_preexec(None, None, cg.procs_file))
    try:
        assert cg.contains(proc.pid)
        sampler = TreeSampler(proc.pid)  # in-process readings, as the helper takes them
        tree0, cg0 = sampler.cpu_times(), cg.cpu.read()
        with open(fifo, "w") as f:
            f.writelines(f"go {k}\n" for k in range(WORKERS))
        wait_for(lambda: len(list(out.iterdir())) == WORKERS, 30, "the workers' done files")
        wait_for(lambda: cg.path.joinpath("cgroup.procs").read_text().split() == [str(proc.pid)], 10,
                  "the workers' exit")
        tree1, cg1 = sampler.cpu_times(), cg.cpu.read()
        cpu = phase_cpu((tree1[0] - tree0[0], tree1[1] - tree0[1]), cg1.since(cg0))
        burnt = WORKERS * BURN_S
        assert all(float(p.read_text()) >= BURN_S for p in out.iterdir())
        assert cpu is not None and cpu.source == "cgroup"
        assert burnt <= cpu.total_s <= burnt + 0.05 * WORKERS + 0.1, cpu
        assert abs(cpu.user_s + cpu.system_s - cpu.total_s) <= 0.05 * cpu.total_s, cpu
        assert cpu.tree_s is not None and cpu.tree_s <= 0.25 * burnt, cpu
        assert cpu.tree_diff is not None and cpu.tree_diff < -0.75
    finally:
        try:
            with open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "w") as f:
                f.write("quit\n")
        except OSError:
            proc.kill()
        proc.wait(timeout=10)
        assert cg.remove()
        assert not cg.path.exists()
