"""The per-process figures of the real-client drivers (ClientFigures.max_rss, page
faults) as sample rows, and through ``xferlab loadgen``'s JSON document."""
from __future__ import annotations

from runner.cell.samples import phase_samples, process_samples
from runner.load.result import ClientFigures, PhaseResult
from runner.multihost.loadgen import result_from_json, result_to_json


def _proc_result():
    clients = [ClientFigures(100, 0.5, True, max_rss=rss, minor_faults=10, major_faults=m)
               for rss, m in ((4 << 20, 0), (6 << 20, 1), (5 << 20, 2))]
    return PhaseResult(workload="retr_concurrent", elapsed_s=1.0, bytes=300, ops=3, clients=clients)


def test_process_samples():
    rows = {(s.metric, s.stat): s for s in process_samples(_proc_result())}
    assert rows[("client_max_rss", "max")].value == 6 << 20
    assert rows[("client_max_rss", "max")].raw == [4 << 20, 6 << 20, 5 << 20]
    assert rows[("client_max_rss", "median")].value == 5 << 20
    assert rows[("client_page_faults", "minor")].value == 30 and rows[("client_page_faults", "major")].value == 3
    assert all(s.unit == ("bytes" if s.metric == "client_max_rss" else "count") for s in rows.values())
    assert ("client_max_rss", "max") in {(s.metric, s.stat) for s in phase_samples(_proc_result())}
    sessions = PhaseResult(workload="retr_concurrent", elapsed_s=1.0, clients=[ClientFigures(1, 1.0)] * 2)
    assert process_samples(sessions) == []


def test_loadgen_json_keeps_process_figures():
    back = result_from_json(result_to_json(_proc_result()))
    assert [(c.max_rss, c.minor_faults, c.major_faults) for c in back.clients] == \
        [(4 << 20, 10, 0), (6 << 20, 10, 1), (5 << 20, 10, 2)]
    old = result_from_json({"workload": "login", "elapsed_s": 1.0, "clients": [[1, 0.5, True]]})
    assert old.clients[0].max_rss == 0 and old.clients[0].requests == 0
