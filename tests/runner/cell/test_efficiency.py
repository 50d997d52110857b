"""Server and client CPU per unit of work: runner.cell.samples.efficiency_samples
against a server that burns a known amount of CPU per login, and the campaign table's
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
from runner.report.data import CampaignData, Series
from runner.report.tables import campaign_table

BURN_MS = 8.0

# A single-threaded FTP server on loopback that spins BURN_MS of CPU time on each PASS.
_SERVER = textwrap.dedent(f"""
    import selectors, socket, sys, time
    sel = selectors.DefaultSelector()
    ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0)); ls.listen(1024); ls.setblocking(False)
    print(ls.getsockname()[1], flush=True)
    sel.register(ls, selectors.EVENT_READ)
    bufs = {{}}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for key, _ in sel.select(1.0):
            s = key.fileobj
            if s is ls:
                c, _ = ls.accept(); c.setblocking(True); c.sendall(b"220 burn\\r\\n")
                sel.register(c, selectors.EVENT_READ); bufs[c] = b""
                continue
            data = s.recv(4096)
            if not data:
                sel.unregister(s); s.close(); continue
            bufs[s] += data
            while b"\\r\\n" in bufs[s]:
                line, bufs[s] = bufs[s].split(b"\\r\\n", 1)
                cmd = line.split(b" ")[0].upper()
                if cmd == b"USER": s.sendall(b"331 pass\\r\\n")
                elif cmd == b"PASS":
                    t = time.process_time()
                    while time.process_time() - t < {BURN_MS} / 1000: pass
                    s.sendall(b"230 ok\\r\\n")
                elif cmd == b"QUIT": s.sendall(b"221 bye\\r\\n")
                else: s.sendall(b"502 no\\r\\n")
""")


@pytest.fixture
def burner():
    p = subprocess.Popen([sys.executable, "-c", _SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(p.stdout.readline())
        yield p, port
    finally:
        p.kill()
        p.wait(10)


def test_server_cpu_per_login_matches_the_cpu_the_server_burns(burner):
    proc, port = burner
    ps = psutil.Process(proc.pid)
    c0 = ps.cpu_times()
    r = run_workload_sync("login", Target("127.0.0.1", port, "u", "p"),
                          WorkloadParams(clients=60, op_timeout=20, phase_timeout=60))
    time.sleep(0.2)
    c1 = ps.cpu_times()
    assert r.ops == 60 and not r.errors, (r.errors, r.notes)
    cpu = (c1.user - c0.user, c1.system - c0.system)
    rows = {x.metric: x for x in phase_samples(r, server_cpu=cpu)}
    per_op = rows["server_cpu_per_op"]
    assert per_op.unit == "us/op"
    # 8 ms burnt per login, plus the server's own accept/recv/send (about 0.1-0.5 ms)
    assert BURN_MS * 1000 <= per_op.value < BURN_MS * 1000 * 1.4, per_op.value
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
