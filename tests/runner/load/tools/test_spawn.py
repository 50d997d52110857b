"""runner.load.tools.spawn: N processes released together, each one's rusage, the bound,
and no process left behind (clientspawn compiled with the system C compiler)."""
from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from runner.load.base import DriverUnavailable
from runner.load.tools import spawn as clients
from runner.load.tools.spawn import Job, run_clients
from tests.runner.support import assert_gone

#: A Python the clients can run: as root they run as the lab user (runner.load.tools.labuser),
#: which may not reach this interpreter's folder (e.g. one under /root).
CLIENT_PYTHON = shutil.which("python3", path=os.defpath) or sys.executable


@pytest.fixture
def spawner():
    try:
        return clients.build_spawner()
    except DriverUnavailable as e:
        pytest.skip(str(e))



def _jobs(tmp_path, argvs):
    out = []
    for i, argv in enumerate(argvs):
        d = tmp_path / f"c{i}"
        d.mkdir()
        out.append(Job(argv, str(d)))
    return out


def test_max_rss_and_faults_are_the_clients_own(tmp_path, spawner):
    # this process holds 300 MiB: a client forked from it would report at least that
    ballast = bytearray(300 << 20)
    ballast[::4096] = b"x" * len(ballast[::4096])
    alloc = "b = bytearray(50 << 20); b[::4096] = b'x' * len(b[::4096])"
    run = run_clients(_jobs(tmp_path, [["true"], [CLIENT_PYTHON, "-c", alloc]]), folder=tmp_path, bound_s=30,
                      spawner=spawner)
    small, big = run.clients
    assert small.returncode == 0 and big.returncode == 0 and not small.killed
    assert small.max_rss < 20 << 20, small.max_rss  # not the parent's 300 MiB
    assert big.max_rss >= 50 << 20
    assert big.minor_faults >= (50 << 20) // 4096 // 2  # every page touched (THP may merge some)
    assert big.user_s + big.system_s > 0 and big.seconds > 0
    assert run.released_epoch == pytest.approx(time.time(), abs=60)
    del ballast


def test_rss_floor_does_not_grow_with_the_job_list(tmp_path, spawner):
    """clientspawn keeps no job list when it forks: 300 clients with 20 KB command lines
    (6 MB of jobs) each still report about clientspawn's own 1 MiB."""
    args = ["x" * 100] * 200
    run = run_clients(_jobs(tmp_path, [["true", *args]] * 300), folder=tmp_path, bound_s=60, spawner=spawner)
    assert all(c.returncode == 0 for c in run.clients)
    assert max(c.max_rss for c in run.clients) < 4 << 20


def test_released_together_and_timed_from_release(tmp_path, spawner):
    run = run_clients(_jobs(tmp_path, [["sleep", "0.3"]] * 4), folder=tmp_path, bound_s=30, spawner=spawner)
    starts = [c.start for c in run.clients]
    assert max(starts) - min(starts) < 0.25  # one release, not one after another with 0.3 s sleeps
    assert all(c.start >= run.released for c in run.clients)
    assert all(0.28 < c.seconds < 5 for c in run.clients)


def test_failure_exit_status_and_stderr(tmp_path, spawner):
    run = run_clients(_jobs(tmp_path, [["sh", "-c", "echo first >&2; echo boom >&2; exit 3"],
                                       ["no-such-program-xferlab"]]), folder=tmp_path, bound_s=30, spawner=spawner)
    bad, missing = run.clients
    assert bad.returncode == 3 and bad.stderr_tail() == "first | boom"
    assert missing.returncode == 127 and "cannot start no-such-program-xferlab" in missing.stderr_tail()


def test_hang_past_the_bound_is_killed_with_its_children(tmp_path, spawner):
    # the second client leaves a grandchild in the group: the group kill takes it too
    t0 = time.monotonic()
    run = run_clients(_jobs(tmp_path, [["sleep", "60"], ["sh", "-c", "sleep 60 & echo $! > kid; wait"], ["true"]]),
                      folder=tmp_path, bound_s=0.5, spawner=spawner)
    assert time.monotonic() - t0 < 10
    hung, parent, quick = run.clients
    assert hung.killed and hung.returncode == -signal.SIGKILL and 0.4 < hung.seconds < 5
    assert parent.killed and not quick.killed and quick.returncode == 0
    kid = int((tmp_path / "c1" / "kid").read_text())
    assert_gone([hung.pid, parent.pid, kid], within_s=3.0)


def test_interrupted_wait_leaves_no_process(tmp_path, spawner, monkeypatch):
    def interrupted(pid, bound):
        time.sleep(0.3)
        raise KeyboardInterrupt

    monkeypatch.setattr(clients, "_wait_unreaped", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_clients(_jobs(tmp_path, [["sh", "-c", "echo $$ > pid; exec sleep 60"]] * 3), folder=tmp_path,
                    bound_s=60, spawner=spawner)
    pids = [int((tmp_path / f"c{i}" / "pid").read_text()) for i in range(3)]
    time.sleep(0.1)
    assert_gone(pids, within_s=3.0)


def test_spawner_past_its_own_bound_is_killed(tmp_path, spawner, monkeypatch):
    monkeypatch.setattr(clients, "GRACE_S", 0.2)
    # clientspawn reaps only its own children: a client that ignores nothing but is
    # stopped cannot stop the spawner, so stop the spawner itself instead (from here: a
    # client running as the lab user may not signal it)
    jobs = _jobs(tmp_path, [["sh", "-c", "echo $$ > pid; exec sleep 60"]])

    def stop_spawner() -> None:
        pid_file = tmp_path / "c0" / "pid"
        for _ in range(400):  # bounded: 20 s
            if pid_file.exists() and pid_file.read_text().strip():
                ppid = int(Path(f"/proc/{pid_file.read_text().strip()}/stat").read_text().rsplit(")", 1)[1].split()[1])
                os.kill(ppid, signal.SIGSTOP)
                return
            time.sleep(0.05)

    stopper = threading.Thread(target=stop_spawner, daemon=True)
    stopper.start()
    t0 = time.monotonic()
    run = run_clients(jobs, folder=tmp_path, bound_s=3, spawner=spawner)
    stopper.join()
    assert time.monotonic() - t0 < 10
    assert run.spawner_killed and run.clients[0].killed and run.clients[0].end == 0.0
    assert_gone([int((tmp_path / "c0" / "pid").read_text())], within_s=3.0)


def test_bad_arguments(tmp_path, spawner):
    with pytest.raises(ValueError, match="no jobs"):
        run_clients([], folder=tmp_path, bound_s=1, spawner=spawner)
    with pytest.raises(ValueError, match="tab or a newline"):
        run_clients(_jobs(tmp_path, [["echo", "a\tb"]]), folder=tmp_path, bound_s=1, spawner=spawner)


def test_no_compiler_is_a_clear_skip_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(DriverUnavailable, match="build-essential"):
        clients.build_spawner()


def test_clients_die_with_a_killed_runner(tmp_path, spawner):
    """SIGKILL of the runner process (no finally block runs) while its clients hang:
    clientspawn notices its parent is gone within its 100 ms tick and kills them, long
    before their 60 s bound (before the tick it kept them only until the bound: a killed
    `xferlab run` left 159 wget processes running). The runner here is a child Python
    running run_clients in a thread."""
    import subprocess

    code = f"""
import threading
from pathlib import Path
from runner.load.tools.spawn import Job, run_clients
jobs = [Job(["sh", "-c", "echo $$ > pid; exec sleep 60"], {str(tmp_path)!r} + "/c" + str(i)) for i in range(3)]
threading.Thread(target=lambda: run_clients(jobs, folder=Path({str(tmp_path)!r}), bound_s=60,
                                            spawner=Path({str(spawner)!r})), daemon=True).start()
threading.Event().wait()
"""
    for i in range(3):
        (tmp_path / f"c{i}").mkdir()
    runner = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        while not all((tmp_path / f"c{i}" / "pid").exists() for i in range(3)) and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = [int((tmp_path / f"c{i}" / "pid").read_text()) for i in range(3)]
        time.sleep(0.3)  # past one tick with the runner alive: the clients must still run
        assert all(_alive(p) for p in pids)
    finally:
        runner.kill()
        runner.wait()
    assert_gone(pids, within_s=2.0)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
