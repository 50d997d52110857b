"""TreeSampler on real processes: forked children, exits, vanished pids."""
from __future__ import annotations

import os
import time

import psutil
import pytest

from runner.metrics.sampler import MemSnapshot, TreeSampler
from runner.spec.request import ServerRequest
from tests.runner.support import start_or_skip

MiB = 1 << 20


def test_sees_children_memory(forker):
    s = TreeSampler(forker.pid, interval=0.05).start()
    try:
        before = s.checkpoint("before")
        assert before.nprocs == 1
        for _ in range(3):
            forker.fork(20)
        forker.wait_children_ready(3)
        after = s.checkpoint("after")
        assert isinstance(after, MemSnapshot)
        assert after.nprocs == 4
        # Each child touches 20 MiB of its own (a bytearray): its USS is those pages plus the
        # few it copied on write (about 0.4 MiB here; 1 MiB allowed), while the parent's anon
        # pages (rss - shared before the forks) stop being unique to it once shared with them.
        # rss - shared counts anon pages whether shared or not: each child maps all of the
        # parent's plus its 20 MiB (1 MiB per child allowed for its own new allocations).
        parent_anon = before.rss_minus_shared
        uss = after.uss - before.uss
        assert 3 * 20 * MiB - parent_anon <= uss <= 3 * 21 * MiB, (uss / MiB, parent_anon / MiB)
        anon = after.rss_minus_shared - before.rss_minus_shared
        assert 3 * (20 * MiB + parent_anon) - 3 * MiB <= anon <= 3 * (21 * MiB + parent_anon), \
            (anon / MiB, parent_anon / MiB)
        assert s.peak_uss >= after.uss
        user, system = s.cpu_times()
        # 3 children x 0.2 s busy loop (+ their page touching and the forker's own few ms)
        assert 0.6 - 0.03 <= user + system <= 0.6 + 0.4, (user, system)
        forker.reap()  # children exit and are waited for: their CPU moves to the parent
        time.sleep(0.2)
        gone = s.checkpoint("reaped")
        assert gone.nprocs == 1
        u2, s2 = s.cpu_times()
        assert u2 + s2 >= user + system - 0.01
    finally:
        s.stop()
    s.stop()  # idempotent
    assert [c.name for c in s.checkpoints] == ["before", "after", "reaped"]
    tl = s.timeline
    assert len(tl) >= 3
    assert all(len(x) == 4 for x in tl)
    assert max(x[3] for x in tl) == 4
    assert max(x[1] for x in tl) <= s.peak_uss
    assert s.peak_rss_minus_shared >= after.rss_minus_shared
    assert s.stats["samples"] >= len(tl)


def test_sampler_runs_in_another_process(forker):
    with TreeSampler(forker.pid, interval=0.05) as s:
        helper = s._proc
        assert helper is not None and helper.pid != os.getpid()
        assert psutil.Process(helper.pid).cmdline()[-4:-2] == ["runner.metrics._sampler_worker",
                                                              str(forker.pid)]
    assert helper.poll() is not None  # helper gone after stop


def test_root_vanishing_does_not_crash(forker):
    s = TreeSampler(forker.pid, interval=0.02).start()
    forker.fork(5)
    forker.wait_children_ready(1)
    forker.close()  # kill the whole tree while sampling
    time.sleep(0.2)
    snap = s.checkpoint("after-kill")
    assert snap.nprocs == 0 and snap.uss == 0
    assert s.cpu_times() == (0.0, 0.0)
    s.stop()
    assert s.timeline


def test_without_helper_samples_in_process(forker):
    s = TreeSampler(forker.pid)
    snap = s.checkpoint("sync")
    assert snap.nprocs == 1 and snap.uss > 0
    assert s.peak_uss == snap.uss
    # Known work: one child burns 0.2 s of its own CPU (time.process_time) then sleeps.
    # The sampler's CPU time of the tree must grow by that much: >= 0.2 s less two
    # clock ticks of /proc rounding, and not much more (forking, touching 1 MiB and the
    # forker's own line handling take milliseconds).
    u0, s0 = s.cpu_times()
    forker.fork(1)
    forker.wait_children_ready(1)
    u1, s1 = s.cpu_times()
    burned = (u1 + s1) - (u0 + s0)
    assert 0.2 - 0.02 <= burned <= 0.2 + 0.15, f"tree CPU grew by {burned:.3f} s for a 0.2 s busy loop"
    assert u1 >= u0 and s1 >= s0
    s.stop()
    assert s.timeline == []


def test_missing_pid_is_clear():
    dead = psutil.Popen(["true"])
    dead.wait()
    with pytest.raises(ProcessLookupError, match=str(dead.pid)):
        TreeSampler(dead.pid)
    with pytest.raises(ValueError):
        TreeSampler(os.getpid(), interval=0)


@pytest.mark.integration
def test_forking_ftp_server_tree():
    """proftpd forks one process per session: the sampler sees them all."""
    import ftplib

    from runner.backends.local import LocalBackend
    b = LocalBackend()
    req = ServerRequest("proftpd")
    h = start_or_skip(b, req)
    clients = []
    try:
        deadline = time.monotonic() + 10  # the readiness probe's session may still be exiting
        while psutil.Process(h.pid).children(recursive=True) and time.monotonic() < deadline:
            time.sleep(0.05)
        s = TreeSampler(h.pid, interval=0.05).start()
        idle = s.checkpoint("idle")
        for _ in range(4):
            f = ftplib.FTP()
            f.connect(h.target.host, h.target.port, timeout=10)
            f.login(h.target.user, h.target.password)
            clients.append(f)
        busy = s.checkpoint("4 sessions")
        assert busy.nprocs >= idle.nprocs + 4
        # rss - shared counts each session process's resident private+COW pages: it grows.
        # Summed USS need not: pages shared copy-on-write between the parent and its
        # forked children are unique to no process (docs/methodology.md).
        assert busy.rss_minus_shared > idle.rss_minus_shared + 4 * 64 * 1024
        assert busy.uss > 0
        s.stop()
        assert max(x[3] for x in s.timeline) >= idle.nprocs + 4
    finally:
        for f in clients:
            f.close()
        h.stop()
