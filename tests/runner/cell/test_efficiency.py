"""Server and client CPU per unit of work: the sampler's server CPU and
runner.cell.samples.efficiency_samples against a forking server that burns a known amount
of CPU per login, checked against its cgroup's own counter; and the campaign table's
server CPU column."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.cell.samples import GIB, efficiency_samples, phase_samples
from runner.load.ftp.workloads import run_workload_sync
from runner.load.result import PhaseResult
from runner.load.target import Target
from runner.metrics.sampler import TreeSampler
from runner.report.data import CampaignData, Series
from runner.report.tables import campaign_table
from tests.support.cpu_cgroup import CpuCgroup

BURN_MS = 8.0
LOGINS = 60

# An FTP server on loopback that forks one process per session, as vsftpd and proftpd do;
# each session spins BURN_MS of its own CPU time on PASS. The parent reaps its children
# every 50 ms (their CPU then counts in its cutime/cstime, as the sampler's docstring says).
_SERVER = textwrap.dedent(f"""
    import os, select, socket, time
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0)); ls.listen(1024)
    print(ls.getsockname()[1], flush=True)

    def session(c):
        c.settimeout(30)
        c.sendall(b"220 burn\\r\\n")
        for line in c.makefile("rb"):
            cmd = line.split(b" ")[0].strip().upper()
            if cmd == b"USER": c.sendall(b"331 pass\\r\\n")
            elif cmd == b"PASS":
                t = time.process_time()
                while time.process_time() - t < {BURN_MS} / 1000: pass
                c.sendall(b"230 ok\\r\\n")
            elif cmd == b"QUIT":
                c.sendall(b"221 bye\\r\\n"); return
            else: c.sendall(b"502 no\\r\\n")

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([ls], [], [], 0.05)
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0: break
            except ChildProcessError: break
        if ready:
            c, _ = ls.accept()
            if os.fork() == 0:
                ls.close()
                try: session(c)
                finally: os._exit(0)
            c.close()
""")


@pytest.fixture
def burner():
    """The forking server, in a cgroup of its own: ``(process, port, cgroup)``."""
    with CpuCgroup() as cg:
        p = subprocess.Popen([sys.executable, "-c", _SERVER], stdout=subprocess.PIPE, text=True)
        try:
            cg.add(p.pid)
            port = int(p.stdout.readline())
            yield p, port, cg
        finally:
            p.kill()
            p.wait(10)


def _children_reaped(pid: int, timeout: float = 10.0) -> None:
    """Wait until ``pid`` has no child left, zombies included (bounded)."""
    deadline = time.monotonic() + timeout
    while psutil.Process(pid).children():
        assert time.monotonic() < deadline, "the server's session processes did not exit"
        time.sleep(0.05)


def test_server_cpu_per_login_matches_the_cpu_the_server_burns(burner):
    """The lab's own path (TreeSampler over the server's process tree, its helper process
    started, then phase_samples) against two references: the CPU the sessions burn by
    construction (LOGINS x BURN_MS of process time) and the cgroup's ``usage_usec``, which
    counts every process of the server, exited sessions included."""
    proc, port, cg = burner
    sampler = TreeSampler(proc.pid).start()
    try:
        ref0 = cg.usage_s()
        c0 = sampler.cpu_times()
        r = run_workload_sync("login", Target("127.0.0.1", port, "u", "p"),
                              WorkloadParams(clients=LOGINS, op_timeout=20, phase_timeout=60))
        _children_reaped(proc.pid)
        c1 = sampler.cpu_times()
        ref = cg.usage_s() - ref0
    finally:
        sampler.stop()
    assert r.ops == LOGINS and not r.errors, (r.errors, r.notes)
    cpu = (c1[0] - c0[0], c1[1] - c0[1])
    rows = {x.metric: x for x in phase_samples(r, server_cpu=cpu)}
    per_op = rows["server_cpu_per_op"]
    assert per_op.unit == "us/op"
    lab = per_op.value * LOGINS / 1e6
    # the cgroup: at least the burn; at most the burn plus 3 ms per session of fork,
    # accept, five replies and exit (measured about 1 ms)
    assert LOGINS * BURN_MS / 1000 <= ref <= LOGINS * (BURN_MS + 3) / 1000, ref
    # /proc counts in clock ticks of 10 ms, four counters of the root (user, system, and
    # its reaped children's): the lab's figure within 5% + 40 ms of the cgroup's
    assert abs(lab - ref) <= 0.05 * ref + 0.04, (lab, ref)
    assert "client_cpu_per_op" in rows and "server_cpu_per_gib" not in rows


def test_efficiency_units_and_edge_cases():
    moved = PhaseResult("retr", elapsed_s=2.0, bytes=4 * GIB, ops=4)
    (row,) = efficiency_samples("server_cpu", 1.0, moved)
    assert (row.metric, row.unit, row.value) == ("server_cpu_per_gib", "s/GiB", 0.25)
    logins = PhaseResult("login", elapsed_s=0.1, ops=300)
    (row,) = efficiency_samples("client_cpu", 0.03, logins)
    assert (row.metric, row.unit) == ("client_cpu_per_op", "us/op") and row.value == pytest.approx(100.0)
    assert efficiency_samples("server_cpu", 0.5, PhaseResult("login", elapsed_s=1.0)) == []


def test_campaign_table_shows_server_cpu_only_when_stored():
    def series(metric, unit, vals, server="a"):
        return Series(server, "login", "3 concurrent clients (connect, login)", metric, unit, False, vals, "k")
    base = [series("elapsed", "s", (0.1, 0.2)), series("elapsed", "s", (0.3,), "b")]
    plain = campaign_table(CampaignData(1, "c", ["a", "b"], base))
    assert [c.key for c in plain.columns][-1] == "client_cpu"
    data = CampaignData(1, "c", ["a", "b"], base + [series("server_cpu_per_op", "us/op", (40.0, 42.0, 44.0))])
    t = campaign_table(data)
    assert t.columns[-1].key == "server_cpu" and t.columns[-1].header == "server CPU"
    assert [r.cells[-1].text for r in t.rows] == ["42.00 us/op", "n/a"]
    assert t.records[0]["server_cpu"] == 42.0 and t.records[0]["server_cpu_unit"] == "us/op"


def test_comparison_of_server_cpu_uses_each_rows_cost_metric():
    from runner.report.tables import COST_METRICS, comparison_table

    def s(server, workload, metric, unit, vals):
        return Series(server, workload, workload, metric, unit, False, vals, "k")
    data = CampaignData(1, "c", ["a", "b"], [
        s("a", "retr", "server_cpu_per_gib", "s/GiB", (0.30, 0.31, 0.32, 0.30, 0.31)),
        s("b", "retr", "server_cpu_per_gib", "s/GiB", (0.60, 0.61, 0.62, 0.60, 0.63)),
        s("a", "login", "server_cpu_per_op", "us/op", (100.0, 101.0, 99.0, 100.0, 102.0)),
        s("b", "login", "server_cpu_per_op", "us/op", (100.0, 99.0, 101.0, 100.0, 101.0))])
    t = comparison_table(data, "a", "b", metric=COST_METRICS, ci=False)
    rows = {r.cells[0].text: r for r in t.rows}
    assert rows["retr"].cells[1].text == "0.310 s/GiB" and rows["retr"].cells[2].text == "0.610 s/GiB"
    assert rows["retr"].cells[3].text == "1.97x slower" and rows["retr"].cells[3].mark == "loss"
    assert rows["login"].unit == "us/op" and rows["login"].cells[3].text == "no change"  # equal medians
    assert [r["metric"] for r in t.records[:2]] == ["server_cpu_per_gib", "server_cpu_per_op"] or \
        {r["metric"] for r in t.records[:2]} == set(COST_METRICS)
