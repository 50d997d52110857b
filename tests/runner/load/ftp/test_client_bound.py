"""The client-bound flag from a real starved client: xferlab's own FTP client (``xferlab
loadgen``, the process a campaign runs for each client) driving tpd on loopback, pinned to a
CPU that a busy loop started by the test also holds. Its CPU share then stays near one
half, below the 90% that would flag it; the kernel's run-queue wait (schedstat,
runner.metrics.runqueue) supplies the other half and the flag fires (with the time the
hypervisor stole from its CPU while it ran: runner.metrics.runqueue.saturation). Without the busy
loop, a client at a moderate fixed rate is not flagged.

Physics of the case: two always-runnable tasks of equal weight on one CPU each run about
half of the time, and a single-threaded task that is always runnable is either running or
waiting, so its CPU share + run-queue share is about 1, and its operation rate about half
of what it reaches with the CPU to itself. The client runs on asyncio's loop, which
resolves the numeric data-connection address without a thread (uvloop resolves it on its
thread pool, whose threads' waits add to the process's figure). As root, the client, the
busy loop and tpd each get a session of their own with autogroup nice -19 (equal weights,
above the rest of a shared machine: sched(7), "The autogroup feature").
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from runner.catalogue.workloads import WorkloadParams
from runner.load.result import PhaseResult, client_bound, client_runqueue_share, client_saturation, client_utilization
from runner.multihost.loadgen import loadgen_args, result_from_json
from tests.runner.support import start_or_skip
from tests.support.skips import lacks_if
from tests.support.steal import Steal

pytestmark = [lacks_if((os.cpu_count() or 1) < 2, "a second CPU (server and client apart)"),
              lacks_if(not Path("/proc/self/task").is_dir() or not Path(f"/proc/self/task/{os.getpid()}/schedstat")
                       .is_file(), "/proc/PID/task/TID/schedstat (CONFIG_SCHED_INFO)")]

SERVER_CPU, CLIENT_CPU = 0, 1
NICE = -19
#: The busy loop: bounded in time whatever happens to the test.
BUSY = "import time\nt = time.monotonic() + 30\nwhile time.monotonic() < t: pass"
REPO = Path(__file__).resolve().parents[4]


def _boost() -> None:
    """In a child (preexec_fn, after setsid): as root, nice -19 for the process and its new
    autogroup, so the test's tasks weigh alike and above the rest of the machine."""
    if os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(NICE))


def _pinned_boosted() -> None:
    os.sched_setaffinity(0, {CLIENT_CPU})
    _boost()


def _phase(target, params: WorkloadParams) -> PhaseResult:
    """One retr_sustained phase from an ``xferlab loadgen`` process pinned to CLIENT_CPU."""
    args = loadgen_args("retr_sustained", {"host": target.host, "port": target.port, "user": target.user,
                                           "password": target.password},
                        params, start_at=time.time() + 3.0, name="client", cpu=[CLIENT_CPU])
    env = dict(os.environ, XFERLAB_EVENT_LOOP="asyncio", PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "runner.cli", *args], capture_output=True, text=True, timeout=120,
                       env=env, cwd=REPO, start_new_session=True, preexec_fn=_boost)
    lines = p.stdout.strip().splitlines()
    assert p.returncode == 0 and lines, f"loadgen exited {p.returncode}: {p.stdout[-1000:]} {p.stderr[-2000:]}"
    doc = json.loads(lines[-1])
    return result_from_json(doc["result"])


#: The moderate phase's rate, a share of the rate the client reaches alone.
MODERATE = 0.25


def test_starved_client_is_flagged_and_an_idle_one_is_not():
    from runner.backends import get_backend
    from runner.spec.request import ServerRequest

    handle = start_or_skip(get_backend("local"), ServerRequest("tpd"), cpu=[SERVER_CPU])
    try:
        if os.geteuid() == 0 and Path(f"/proc/{handle.pid}/autogroup").read_text() != Path(
                "/proc/self/autogroup").read_text():
            Path(f"/proc/{handle.pid}/autogroup").write_text(str(NICE))  # tpd's own session
        t = handle.target
        closed = dict(clients=64, file_size="4K", duration=2.0, session="reuse", op_timeout=20, phase_timeout=60)
        alone = _phase(t, WorkloadParams(**closed))
        assert alone.error_count == 0 and alone.ops > 0, alone.errors
        full_rate = alone.ops_rate  # the client's rate with its CPU to itself (client-bound)

        # a fixed rate well under what the client can do alone: it sleeps between operations
        # (at 40% of its own rate its CPU read 0.735-0.935 here, pacing costs more per
        # operation than the closed loop: too near the bound below, so a quarter)
        moderate = _phase(t, WorkloadParams(**closed, rate=MODERATE * full_rate))
        share = client_runqueue_share(moderate)
        print(f"alone: {full_rate:.0f} ops/s, CPU {client_utilization(alone):.3f}, "
              f"wait {client_runqueue_share(alone):.3f}; at {MODERATE * full_rate:.0f}/s: "
              f"CPU {client_utilization(moderate):.3f}, wait {share:.3f}")
        assert share is not None and 0.0 <= share < 0.3
        assert 0.1 < client_utilization(moderate) < 0.8
        assert not client_bound(moderate)

        busy = subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True, preexec_fn=_pinned_boosted)
        try:
            with Steal([CLIENT_CPU]) as steal:
                starved = _phase(t, WorkloadParams(**closed))
        finally:
            busy.kill()
            busy.wait(timeout=10)
    finally:
        handle.stop()
    util, wait, stolen = client_utilization(starved), client_runqueue_share(starved), starved.client_steal_share
    print(f"with a busy loop on its CPU: {starved.ops_rate:.0f} ops/s, CPU {util:.3f}, wait {wait}, "
          f"steal {stolen}, saturation {client_saturation(starved):.3f}; CPU {CLIENT_CPU} over the block: {steal}")
    assert starved.error_count == 0, starved.errors
    assert wait is not None and 0.3 <= wait <= 0.7  # half the CPU each, give or take the scheduler's slices
    assert 0.3 <= util <= 0.7 < 0.9  # its CPU share alone would not flag it
    # the client's CPU's steal over the phase: at most what psutil read for that CPU over the
    # block around it (10 ms ticks, one each side)
    assert stolen is not None and 0.0 <= stolen * starved.elapsed_s <= steal.seconds + 0.02, (stolen, str(steal))
    # single-threaded and always runnable: running, waiting, or running on a virtual CPU the
    # host took (steal: neither CPU time nor run-queue wait, counted by the saturation; a
    # CI run without that read CPU + wait 0.831, its steal not recorded), so the flag fires
    assert client_bound(starved) and client_saturation(starved) <= 1.05, (util, wait, stolen, str(steal))
    assert 0.3 <= starved.ops_rate / full_rate <= 0.75  # about half the CPU, about half the rate
