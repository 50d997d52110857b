"""runner.metrics.runqueue: the per-thread run-queue wait of a process, and how it reaches
the stored rows and the tables (the flag from a real starved client:
tests/runner/load/ftp/test_client_bound.py)."""
from __future__ import annotations

import os
import threading
import time

import psutil
import pytest

from runner.cell.samples import headline, phase_samples
from runner.load.result import (
    PhaseResult,
    client_bound,
    client_runqueue_share,
    client_saturation,
    cpu_pressure_share,
)
from runner.metrics import runqueue
from runner.metrics.runqueue import (
    CLIENT_BOUND,
    MAX_STEAL_SHARE,
    cpu_pressure_us,
    cpu_steal_s,
    saturation,
    steal_share,
    steal_shown,
    thread_waits,
    waited_s,
)
from runner.report.tables import client_cpu_cell


def test_thread_waits_reads_every_thread_of_this_process():
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        waits = thread_waits()
        assert waits is not None and os.getpid() in waits and t.native_id in waits
        assert thread_waits(os.getpid()) is not None
    finally:
        stop.set()
        t.join(timeout=5)


def test_thread_waits_of_a_gone_process_is_none():
    assert thread_waits(2 ** 22 + 7) is None  # above the largest pid_max (4194304)


def test_waited_s_counts_growth_and_new_threads_and_drops_exited_ones():
    before = {1: 1_000_000_000, 2: 500_000_000, 3: 10}
    after = {1: 1_250_000_000, 2: 500_000_000, 4: 100_000_000}  # 3 exited, 4 was born
    assert waited_s(before, after) == 0.25 + 0.0 + 0.1
    assert waited_s(None, after) is None and waited_s(before, None) is None


def test_waited_s_of_a_sleeping_thread_stays_near_zero():
    before = thread_waits()
    time.sleep(0.2)  # asleep: not on a run queue
    assert 0.0 <= waited_s(before, thread_waits()) < 0.1


def _result(wait: float | None, cpu: float = 0.45) -> PhaseResult:
    return PhaseResult(workload="retr_sustained", elapsed_s=2.0, bytes=1 << 20, ops=100,
                       client_cpu_user_s=cpu * 2.0, client_cpu_system_s=0.0, client_runqueue_wait_s=wait)


def test_run_queue_share_flags_a_starved_client():
    starved = _result(0.95)  # 45% on the CPU, 47.5% waiting for it
    assert client_runqueue_share(starved) == 0.475 and client_saturation(starved) == 0.45 + 0.475
    assert client_bound(starved) and "[client-bound]" in headline(starved)
    rows = {(s.metric, s.stat): s for s in phase_samples(starved)}
    assert rows[("client_cpu", "runqueue_wait")].value == 0.475
    assert rows[("client_cpu", "runqueue_wait")].raw == {"wait_s": 0.95}
    for unmeasured in (_result(None), _result(0.1)):  # not measured, or little wait: utilization decides
        assert not client_bound(unmeasured) and "[client-bound]" not in headline(unmeasured)
    assert ("client_cpu", "runqueue_wait") not in {(s.metric, s.stat) for s in phase_samples(_result(None))}


def test_client_cpu_cell():
    starved = client_cpu_cell(0.45, 0.48)
    assert (starved.text, starved.mark) == ("45% +48% wait client-bound", "loss")
    assert (client_cpu_cell(0.45, 0.10).text, client_cpu_cell(0.45, 0.10).mark) == ("45% +10% wait", "")
    assert client_cpu_cell(0.95).text == "95% client-bound" and client_cpu_cell(0.45).text == "45%"
    assert client_cpu_cell(None, 0.5).text == "n/a"


def test_campaign_table_flags_a_starved_row_from_its_run_queue_series():
    """``xferlab show`` and the exports: the campaign table's ``client CPU`` cell of a row with
    a ``client_cpu_runqueue_wait`` series shows it and flags the row from CPU + wait; a
    campaign stored without it renders as before (no record key, no ``wait``)."""
    from dataclasses import replace

    from runner.report import tables
    from runner.report.text import render
    from tests.runner.report.fixtures import RETR, A, B, _s, campaign

    plain = campaign()
    starved = replace(plain, series=[*plain.series,
                                     _s(B, "retr", RETR, "client_cpu_runqueue_wait", "ratio", False,
                                        [0.50, 0.49, 0.52, 0.51, 0.48])])
    t = tables.campaign_table(starved)
    retr_b = next(r for r in t.rows if r.key == f"{B}:retr")
    assert (retr_b.cells[7].text, retr_b.cells[7].mark) == ("40% +50% wait client-bound", "loss")
    rec = next(r for r in t.records if r["server"] == B and r["workload"] == "retr")
    assert rec["client_cpu_utilization"] == 0.40 and rec["client_cpu_runqueue_wait"] == 0.50
    retr_a = next(r for r in t.rows if r.key == f"{A}:retr")
    assert retr_a.cells[7].text == "95% client-bound"  # no wait recorded for A: utilization alone
    assert "client_cpu_runqueue_wait" not in tables.campaign_table(plain).records[0]
    assert "+50% wait" in render([t], width=200)


def test_cpu_pressure_reads_the_some_total(tmp_path):
    psi = tmp_path / "cpu"
    psi.write_text("some avg10=98.72 avg60=98.61 avg300=89.33 total=704262969\n"
                   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert cpu_pressure_us(str(psi)) == 704_262_969
    psi.write_text("full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n")  # no "some" line
    assert cpu_pressure_us(str(psi)) is None
    assert cpu_pressure_us(str(tmp_path / "absent")) is None


def test_cpu_pressure_of_this_machine_grows_by_at_most_the_wall_time():
    if cpu_pressure_us() is None:
        pytest.skip("no PSI on this kernel (/proc/pressure/cpu)")
    t0, p0 = time.perf_counter(), cpu_pressure_us()
    time.sleep(0.3)
    p1, t1 = cpu_pressure_us(), time.perf_counter()
    assert p0 is not None and p1 is not None
    # "some" counts wall time with at least one task waiting: never more than the wall time
    assert 0 <= p1 - p0 <= (t1 - t0) * 1e6 + 1000


def test_cpu_pressure_share_reaches_the_stored_rows():
    r = PhaseResult(workload="mixed", elapsed_s=2.0, bytes=1 << 20, ops=100, cpu_pressure_s=1.5)
    assert cpu_pressure_share(r) == 0.75
    rows = {(s.metric, s.stat): s for s in phase_samples(r)}
    assert rows[("machine_cpu", "pressure")].value == 0.75 and rows[("machine_cpu", "pressure")].raw == {"some_s": 1.5}
    assert ("machine_cpu", "pressure") not in {(s.metric, s.stat) for s in phase_samples(_result(None))}


STAT = ("cpu  24115 0 14220 26918 649 0 211 35 0 0\n"
        "cpu0 9013 0 6429 17302 218 0 26 17 0 0\n"
        "cpu1 15101 0 7791 9615 430 0 184 18 0 0\n"
        "cpu3 1 0 1 1 0 0 0 250 0 0\n"
        "intr 123 0 0\n")


def test_cpu_steal_sums_the_steal_column_of_the_cpus_asked_for(tmp_path):
    stat = tmp_path / "stat"
    stat.write_text(STAT)
    hz = os.sysconf("SC_CLK_TCK")
    assert cpu_steal_s([1], str(stat)) == 18 / hz
    assert cpu_steal_s([0, 1, 3], str(stat)) == (17 + 18 + 250) / hz
    assert cpu_steal_s([2], str(stat)) is None  # no line: offline or absent, not measured
    stat.write_text("cpu0 1 2 3 4 5 6 7\n")  # a kernel too old for the steal column
    assert cpu_steal_s([0], str(stat)) is None
    assert cpu_steal_s([0], str(tmp_path / "absent")) is None


def test_cpu_steal_of_this_process_matches_psutil():
    """This process's CPUs read through /proc/stat against psutil's per-CPU figures (the same
    file, parsed by a library), taken around it: between the two readings."""
    import psutil

    cpus = sorted(os.sched_getaffinity(0))
    before = sum(psutil.cpu_times(percpu=True)[c].steal for c in cpus)
    ours = cpu_steal_s()
    after = sum(psutil.cpu_times(percpu=True)[c].steal for c in cpus)
    assert ours is not None and before - 0.011 <= ours <= after + 0.011  # psutil rounds to 10 ms ticks


def test_steal_share_is_the_stolen_seconds_per_cpu_second():
    assert steal_share(10.0, 10.4, 2.0, 2) == pytest.approx(0.1)
    assert steal_share(10.0, 10.0, 2.0, 1) == 0.0
    assert steal_share(10.0, 9.0, 2.0, 1) == 0.0  # a counter that went back: never negative
    assert steal_share(None, 1.0, 2.0, 1) is None and steal_share(1.0, None, 2.0, 1) is None
    assert steal_share(1.0, 2.0, 0.0, 1) is None and steal_share(1.0, 2.0, 1.0, 0) is None


def test_saturation_adds_the_time_stolen_while_the_client_ran():
    # 0.45 of the phase on the CPU with 10% of the CPU stolen: it held the CPU 0.45 / 0.9 = 0.5
    assert saturation(0.45, 0.47, 0.10) == pytest.approx(0.5 + 0.47)
    assert saturation(0.45, 0.47) == pytest.approx(0.92) and saturation(0.45, None, None) == 0.45
    assert saturation(0.45, 0.0, 0.9) == pytest.approx(0.45 / (1 - MAX_STEAL_SHARE))  # capped


def test_one_threshold_and_one_steal_rule_for_every_client_bound_flag():
    """The phase result, the table cell and the capacity search flag at the same 0.90 and
    print the steal from the same 1% (a share that rounds to 1%: 0.0051 is shown, 0.004 is
    not)."""
    assert CLIENT_BOUND == 0.90
    assert runqueue.client_bound(0.45, 0.45) and not runqueue.client_bound(0.45, 0.44)
    assert runqueue.client_bound(0.45, 0.42, 0.10) and not runqueue.client_bound(0.45, 0.42)  # 0.92, 0.87
    assert [steal_shown(s) for s in (None, 0.0, 0.004, 0.0051, 0.01, 0.2)] == [False, False, False, True, True, True]
    assert client_bound(_result(0.90)) and not client_bound(_result(0.89))


def test_steal_lifts_a_starved_client_over_the_flag():
    """A starved client on a virtual machine: CPU 0.45 + wait 0.42 = 0.87 reads as not
    client-bound until the 10% of its CPU the host took while it ran is counted (0.50 + 0.42
    = 0.92). (A CI run read CPU + wait 0.831 for the real starved client, its steal not
    recorded.)"""
    r = _result(0.84)  # 0.45 on the CPU, 0.42 waiting
    assert not client_bound(r)
    stolen = PhaseResult(**{**r.__dict__, "client_steal_share": 0.10})
    assert client_saturation(stolen) == pytest.approx(0.92) and client_bound(stolen)
    rows = {(s.metric, s.stat): s for s in phase_samples(stolen)}
    assert rows[("client_cpu", "steal")].value == 0.10 and rows[("client_cpu", "steal")].unit == "ratio"
    assert ("client_cpu", "steal") not in {(s.metric, s.stat) for s in phase_samples(r)}
    cell = client_cpu_cell(0.45, 0.42, 0.10)
    assert (cell.text, cell.mark) == ("45% +42% wait, 10% stolen client-bound", "loss")
    assert client_cpu_cell(0.45, 0.42, 0.004).text == "45% +42% wait"  # under 1%: not shown, not flagged


def test_campaign_table_keeps_wait_and_steal_beside_the_server_cpu_columns():
    """A row with run-queue wait, steal and server CPU series: the cell counts the steal
    (0.45 / 0.9 + 0.42 = 0.92: flagged) and the records keep all three figures."""
    from dataclasses import replace

    from runner.report import tables
    from tests.runner.report.fixtures import RETR, B, _s, campaign

    plain = campaign()
    data = replace(plain, series=[*plain.series,
                                  _s(B, "retr", RETR, "client_cpu_runqueue_wait", "ratio", False, [0.42] * 5),
                                  _s(B, "retr", RETR, "client_cpu_steal", "ratio", False, [0.10] * 5),
                                  _s(B, "retr", RETR, "server_cpu_per_gib", "s/GiB", False, [0.2] * 5)])
    data = replace(data, series=[replace(s, samples=(0.45,) * 5)
                                 if (s.server, s.workload, s.metric) == (B, "retr", "client_cpu_utilization") else s
                                 for s in data.series])
    t = tables.campaign_table(data)
    cell = next(r for r in t.rows if r.key == f"{B}:retr").cells[7]
    assert (cell.text, cell.mark) == ("45% +42% wait, 10% stolen client-bound", "loss")
    rec = next(r for r in t.records if r["server"] == B and r["workload"] == "retr")
    assert (rec["client_cpu_runqueue_wait"], rec["client_cpu_steal"], rec["server_cpu"]) == (0.42, 0.10, 0.2)


@pytest.mark.parallel  # reads the kernel's CPU list: no time measured
def test_steal_of_chosen_cpus_maps_cpu_numbers_to_the_online_cpus(tmp_path):
    """tests.support.steal reads psutil's per-CPU list, which holds the online CPUs only:
    a CPU number maps through the kernel's list of online CPUs."""
    from tests.support.steal import Steal, online_cpus

    f = tmp_path / "online"
    f.write_text("0-1,3,5-6\n")
    assert online_cpus(f) == [0, 1, 3, 5, 6]
    f.write_text("0\n")
    assert online_cpus(f) == [0]
    assert len(online_cpus()) == len(psutil.cpu_times(percpu=True))
    first = online_cpus()[0]
    with Steal([first]) as s:
        pass
    assert s.ncpus == 1 and 0.0 <= s.share <= 1.0
    with pytest.raises(ValueError, match="not online"):
        with Steal([max(online_cpus()) + 1]):
            pass
