"""``xferlab show`` and every export carry the kernel TCP counters and the listen backlog
of each cell where they are non-zero: a campaign stored through the store helpers in the
test PostgreSQL, its TCP rows made by runner.cell.samples.tcp_samples as a run makes them
(a failed cell with 148 listen overflows, a done cell with SYN-ACK retransmits, a done
cell with every counter zero)."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

from tests.support.tcp_campaign import SERVER, store_tcp_campaign


def _cli(args: list[str], env: dict) -> str:
    p = subprocess.run([sys.executable, "-m", "runner.cli", *args], env=env, capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_show_and_every_export_carry_the_tcp_counters(engine, xferlab_env):
    cid = store_tcp_campaign(engine)
    out = _cli(["show", str(cid)], xferlab_env)
    assert "Kernel TCP counters" in out
    assert "148 listen overflows, 148 listen drops, 296 SYN/SYN-ACK" in out   # the terminal table wraps the rest
    assert "3 SYN/SYN-ACK retransmits" in out and "│             32 │" in out
    assert "154 of 300 sessions waited > 3 s" in out      # the reason, and its counters beside it

    doc = json.loads(_cli(["export", str(cid), "--format", "json"], xferlab_env))
    tcp = doc["tcp"]
    assert [(t["repeat"], t["status"], t["counters"], t["listen_backlog"]) for t in tcp] == [
        (0, "failed", {"ListenOverflows": 148, "ListenDrops": 148, "TCPSynRetrans": 296}, 32),
        (1, "done", {"TCPSynRetrans": 3}, 32),
        (2, "done", {}, 32)]                               # the backlog is non-zero, the counters are not
    assert all(t["server"] == SERVER and t["workload"] == "login" for t in tcp)

    rows = list(csv.DictReader(io.StringIO(_cli(["export", str(cid), "--format", "csv"], xferlab_env))))
    got = {(r["repeat"], r["status"], r["checkpoint"]): float(r["median"]) for r in rows if r["metric"] == "tcp"}
    assert got == {("0", "failed", "ListenOverflows"): 148, ("0", "failed", "ListenDrops"): 148,
                   ("0", "failed", "TCPSynRetrans"): 296, ("1", "done", "TCPSynRetrans"): 3}
    assert [float(r["median"]) for r in rows if r["metric"] == "listen_backlog"] == [32.0] * 3

    for fmt, marker in (("md", "| vsftpd-small-backlog"), ("html", "<td>vsftpd-small-backlog</td>"),
                        ("rst", "Kernel TCP counters\n")):
        text = _cli(["export", str(cid), "--format", fmt], xferlab_env)
        assert "Kernel TCP counters" in text and "148 listen overflows" in text and marker in text, fmt
        assert "3 SYN/SYN-ACK retransmits" in text and "32" in text


def test_the_json_document_round_trips_the_tcp_counters():
    from runner.report.data import CampaignData, CellTcp
    from runner.report.json import load_json, render
    from runner.report.tcp import tcp_table

    cells = [CellTcp("a", "login", "300 concurrent clients (connect, login)", "clients=300", 0, "failed",
                     {"ListenOverflows": 148}, 32),
             CellTcp("a", "login", "300 concurrent clients (connect, login)", "clients=300", 1, "done", {}, 32)]
    data = CampaignData(7, "c", ["a"], [], tcp=cells)
    assert load_json(render(data)) == data
    t = tcp_table(data)
    assert len(t.rows) == 1                                 # one row: the family and status with a count
    assert [c.text for c in t.rows[0].cells] == ["a", "300 concurrent clients (connect, login)", "failed",
                                                 "1 of 1", "148 listen overflows", "32"]
    assert tcp_table(CampaignData(7, "c", ["a"], [], tcp=cells[1:])) is None
    assert "tcp" not in json.loads(render(CampaignData(7, "c", ["a"], [])))


def test_repeats_of_one_cell_family_make_one_row_and_keep_every_repeat_in_the_records():
    from runner.report.data import CampaignData, CellTcp
    from runner.report.tcp import tcp_table

    title = "RETR (server -> client)"
    cells = [CellTcp("a", "retr", title, "size=1", r, "done", c, b)
             for r, c, b in ((0, {"RetransSegs": 3}, 128), (1, {}, 128),
                             (2, {"RetransSegs": 4, "TCPSynRetrans": 1}, 64), (3, {}, None))]
    cells.append(CellTcp("b", "retr", title, "size=1", 0, "done", {"RetransSegs": 2}, None))
    t = tcp_table(CampaignData(7, "c", ["a", "b"], [], tcp=cells))
    assert [[c.text for c in r.cells] for r in t.rows] == [
        ["a", title, "done", "1, 3 of 4", "1 SYN/SYN-ACK retransmits, 7 TCP retransmits", "64"],
        ["b", title, "done", "1 of 1", "2 TCP retransmits", "n/a"]]
    assert [(r["server"], r["repeat"], r["counters"]) for r in t.records] == [
        ("a", 0, {"RetransSegs": 3}), ("a", 2, {"RetransSegs": 4, "TCPSynRetrans": 1}), ("b", 0, {"RetransSegs": 2})]
