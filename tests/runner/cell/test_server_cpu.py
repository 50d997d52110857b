"""runner.cell.server_cpu: which figure a phase's server CPU is, its rows and its per-GiB
and per-op figures; and the report's server CPU cell (runner.report.tables)."""
from __future__ import annotations

import pytest

from runner.cell.outcome import measured
from runner.cell.server_cpu import ServerCpu, phase_cpu
from runner.load.result import PhaseResult
from runner.metrics.cgroup_cpu import CpuStat
from runner.report.data import CampaignData, Series
from runner.report.tables import campaign_table, server_cpu_cell

GIB = 1 << 30


def _rows(samples):
    return {(s.metric, s.stat): s for s in samples}


def _retr(nbytes: int = 2 * GIB) -> PhaseResult:
    return PhaseResult(workload="retr", elapsed_s=2.0, bytes=nbytes, ops=8)


def test_cgroup_figure_wins_and_keeps_the_tree_as_cross_check():
    cpu = phase_cpu((0.01, 0.0), CpuStat(400_000, 20_000, 380_000, 3, 1_500, "/cg/x"))
    assert cpu == ServerCpu("cgroup", 0.02, 0.38, 0.4, 3, 0.0015, 0.01, "/cg/x")
    assert cpu.total_s == 0.4
    assert cpu.tree_diff == pytest.approx(-0.975)
    out = measured(_retr(), build_info={}, server_cpu=cpu)
    assert out.server_cpu_source == "cgroup"
    rows = _rows(out.samples)
    assert rows[("server_cpu", "user")].raw == {"source": "cgroup", "where": "/cg/x", "window": "phase"}
    assert rows[("server_cpu", "usage")].value == 0.4
    assert rows[("server_cpu", "nr_throttled")].value == 3
    assert rows[("server_cpu", "throttled")].value == 0.0015
    assert rows[("server_cpu", "tree")].value == 0.01
    assert rows[("server_cpu", "tree_diff")].value == pytest.approx(-0.975)
    assert rows[("server_cpu_per_gib", "value")].value == pytest.approx(0.2)  # usage / 2 GiB


def test_process_tree_figure_without_a_cgroup():
    cpu = phase_cpu((0.3, 0.1), None)
    assert cpu == ServerCpu("tree", 0.3, 0.1)
    assert cpu.tree_diff is None
    for given in (cpu, (0.3, 0.1)):  # a tuple (multi-host cells) is a process-tree figure
        out = measured(_retr(), build_info={}, server_cpu=given)
        rows = _rows(out.samples)
        assert out.server_cpu_source == "tree"
        assert rows[("server_cpu", "user")].raw["source"] == "tree"
        assert ("server_cpu", "usage") not in rows and ("server_cpu", "tree_diff") not in rows
        assert rows[("server_cpu_per_gib", "value")].value == pytest.approx(0.2)
    assert phase_cpu(None, None) is None
    assert measured(_retr(), build_info={}).server_cpu_source is None


def test_logins_per_op_in_microseconds():
    """300 logins costing 12,345 us of cgroup CPU: 41.15 us/op, not a multiple of a 10 ms tick."""
    cpu = phase_cpu(None, CpuStat(12_345, 2_345, 10_000))
    res = PhaseResult(workload="login", elapsed_s=1.0, ops=300)
    rows = _rows(measured(res, build_info={}, server_cpu=cpu).samples)
    assert rows[("server_cpu_per_op", "value")].value == pytest.approx(12_345 / 300)


def test_server_cpu_cell_shows_the_source_and_flags_disagreement():
    assert server_cpu_cell("0.100 s/GiB", (), ()).text == "0.100 s/GiB"
    assert server_cpu_cell("0.100 s/GiB", ("tree", "tree"), ()).text == "0.100 s/GiB [process tree]"
    ok = server_cpu_cell("0.100 s/GiB", ("cgroup",) * 3, (0.02, -0.09, 0.0))
    assert (ok.text, ok.mark) == ("0.100 s/GiB [cgroup]", "")
    bad = server_cpu_cell("0.100 s/GiB", ("cgroup",) * 3, (-0.98, -0.05, -0.995))
    assert (bad.text, bad.mark) == ("0.100 s/GiB [cgroup; tree -100% in 2 of 3]", "loss")
    assert server_cpu_cell("x", ("tree", "cgroup"), ()).text == "x [process tree+cgroup]"


def test_campaign_table_records_source_and_cross_check():
    series = [Series("vsftpd", "retr", "RETR", "throughput", "MiB/s", True, (900.0, 1000.0)),
              Series("vsftpd", "retr", "RETR", "server_cpu_per_gib", "s/GiB", False, (0.1, 0.12)),
              Series("vsftpd", "retr", "RETR", "server_cpu_tree_diff", "ratio", False, (-0.98, -0.97)),
              Series("tpd", "retr", "RETR", "throughput", "MiB/s", True, (950.0, 990.0)),
              Series("tpd", "retr", "RETR", "server_cpu_per_gib", "s/GiB", False, (0.09, 0.09))]
    data = CampaignData(1, "c", ["vsftpd", "tpd"], series,
                        cpu_sources={("vsftpd", "retr", ""): ("cgroup", "cgroup"), ("tpd", "retr", ""): ("tree",)})
    table = campaign_table(data)
    rec = {r["server"]: r for r in table.records}
    assert rec["vsftpd"]["server_cpu_source"] == "cgroup"
    assert rec["vsftpd"]["server_cpu_tree_diff"] == [-0.98, -0.97]
    assert rec["tpd"]["server_cpu_source"] == "tree" and rec["tpd"]["server_cpu_tree_diff"] is None
    col = [c.key for c in table.columns].index("server_cpu")
    cells = {r.cells[0].text: r.cells[col] for r in table.rows}
    assert cells["vsftpd"].text.endswith("[cgroup; tree -98% in 2 of 2]") and cells["vsftpd"].mark == "loss"
    assert cells["tpd"].text.endswith("[process tree]")
