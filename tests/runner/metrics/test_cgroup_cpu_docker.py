"""The container's CPU cgroup, for real: the forking test server
(tests/support/forking_server.py) runs in a container (no network: commands go through a
FIFO in a bind-mounted folder) whose workers burn a known CPU time after their session
process exited; the server handle's cgroup figure (DockerServerHandle.cgroup_cpu) matches
the burn and the container cgroup's own counters read by this test from the engine's
cgroup folder, and the process-tree figure does not."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from runner.backends.docker.handle import DockerServerHandle
from runner.backends.docker.images import ensure_server_image
from runner.cell.server_cpu import phase_cpu
from runner.config import get_settings
from runner.load.target import Target
from runner.metrics.sampler import TreeSampler
from tests.docker_support import SESSION_LABEL, container_usage_usec
from tests.support.waiting import wait_for

DOCKER_BUILD = False  # uses an image with python3 that `xferlab images build` made
SCRIPT = Path(__file__).resolve().parents[2] / "support" / "forking_server.py"
WORKERS = 4
BURN_S = 0.25


def test_container_cgroup_counts_the_workers_the_tree_loses(client, tmp_path: Path):
    """Four workers burn 0.25 s each inside the container after their session process
    exited (re-parented to the container's init). Bounds: the handle's figure is at
    least the 1.0 s burnt and at most 0.05 s per worker + 0.1 s more, and within 10% of
    this test's own reading of the container cgroup; the process tree rooted at the server
    sees at most a quarter of it."""
    image, _, _ = ensure_server_image("pyftpdlib", client=client, progress=lambda m: print(f"[images] {m}"))
    shutil.copy(SCRIPT, tmp_path / "forking_server.py")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "out").mkdir()
    container = client.containers.run(
        image, entrypoint=["python3", "/x/forking_server.py", "/x/fifo", "/x/out", str(BURN_S)],
        detach=True, init=True, network_mode="none", volumes={str(tmp_path): {"bind": "/x", "mode": "rw"}},
        labels={"xferlab.test": SESSION_LABEL}, user="root")
    handle = DockerServerHandle(client, container, Target("127.0.0.1", 0, "", ""), {}, None, stop_timeout=1)
    try:
        handle._attach_pid()
        assert handle.pid is not None and handle.pid != container.attrs["State"]["Pid"]  # the server, under init
        sampler = TreeSampler(handle.pid)
        own0, cg0, tree0 = container_usage_usec(container.id), handle.cgroup_cpu(), sampler.cpu_times()
        assert cg0 is not None and handle.build_info["cpu_cgroup"].startswith(str(get_settings().cgroup_root))
        with open(tmp_path / "fifo", "w") as f:
            f.writelines(f"go {k}\n" for k in range(WORKERS))
        wait_for(lambda: len(list((tmp_path / "out").iterdir())) == WORKERS, 30, "the workers' done files")
        wait_for(lambda: len(container.top()["Processes"]) == 2, 10, "the workers' exit")  # init and the server
        tree1, cg1, own1 = sampler.cpu_times(), handle.cgroup_cpu(), container_usage_usec(container.id)
        assert cg1 is not None
        cpu = phase_cpu((tree1[0] - tree0[0], tree1[1] - tree0[1]), cg1.since(cg0))
        own_s = (own1 - own0) / 1e6
        burnt = WORKERS * BURN_S
        print(cpu, f"own reading {own_s:.6f} s")
        assert cpu is not None and cpu.source == "cgroup"
        assert burnt <= cpu.total_s <= burnt + 0.05 * WORKERS + 0.1, cpu
        assert abs(cpu.total_s - own_s) <= 0.10 * own_s, (cpu, own_s)
        assert cpu.tree_s is not None and cpu.tree_s <= 0.25 * burnt, cpu
    finally:
        try:
            with open(os.open(tmp_path / "fifo", os.O_WRONLY | os.O_NONBLOCK), "w") as f:
                f.write("quit\n")
        except OSError:
            pass
        handle.stop()
