"""A small hand-made campaign: two servers, three workloads, 5 samples each, memory."""
from __future__ import annotations

from runner.report.data import CampaignData, Series, WorkloadFacts

A = "vsftpd 3.0.3"
B = "pyftpdlib 2.2.0"

K = 1024
M = 1024 * 1024


def _s(server, workload, title, metric, unit, hib, samples, checkpoint=None):
    return Series(server=server, workload=workload, title=title, metric=metric, unit=unit,
                  higher_is_better=hib, samples=tuple(samples), params_key="",
                  checkpoint=checkpoint)


STOR = "STOR (client -> server)"
RETR = "RETR (server -> client)"
LOGIN = "300 concurrent clients (connect, login)"
MEM = "server_mem_rss_minus_shared"


def campaign() -> CampaignData:
    """stor: B significantly slower; retr: B significantly faster; login: not significant."""
    series = [
        # deliberately not in suite order: tables must reorder
        _s(A, "login", LOGIN, "elapsed", "s", False, [0.19, 0.21, 0.18, 0.20, 0.22]),
        _s(B, "login", LOGIN, "elapsed", "s", False, [0.20, 0.18, 0.23, 0.21, 0.22]),
        _s(A, "stor", STOR, "throughput", "MiB/s", True, [600.49, 610.2, 605.1, 598.7, 615.0]),
        _s(B, "stor", STOR, "throughput", "MiB/s", True, [585.9, 560.2, 590.8, 570.4, 580.3]),
        _s(A, "retr", RETR, "throughput", "MiB/s", True, [1524.05, 1510.2, 1530.9, 1498.7, 1545.0]),
        _s(B, "retr", RETR, "throughput", "MiB/s", True, [1652.72, 1640.0, 1660.5, 1630.1, 1671.3]),
        _s(A, "login", LOGIN, "errors", "count", False, [0, 0, 1, 0, 0]),
        _s(B, "login", LOGIN, "errors", "count", False, [0, 0, 0, 0, 0]),
        # load-generator CPU / wall: A's RETR was client-bound (median 95%)
        _s(A, "retr", RETR, "client_cpu_utilization", "ratio", False, [0.95, 0.92, 0.97, 0.93, 0.96]),
        _s(B, "retr", RETR, "client_cpu_utilization", "ratio", False, [0.40, 0.42, 0.38, 0.41, 0.39]),
    ]
    mem = {
        # server: (start per workload, peak stor, peak retr, peak login)
        A: ([352 * K] * 5, [816 * K] * 5, [820 * K] * 5, [140.9 * M] * 5),
        B: ([6.7 * M] * 5, [6.8 * M] * 5, [6.8 * M] * 5, [8.8 * M] * 5),
    }
    for server, (start, stor, retr, login) in mem.items():
        for wl, title, peak in (("stor", STOR, stor), ("retr", RETR, retr), ("login", LOGIN, login)):
            series.append(_s(server, wl, title, MEM, "bytes", False, start, "start"))
            series.append(_s(server, wl, title, MEM, "bytes", False, peak, "peak"))
    return CampaignData(campaign_id=1, name="demo", servers=[A, B], series=series,
                        environment={"kernel": "6.1.0", "cores": 2},
                        failures=[(B, "stor", 5, "421 Timeout")], workloads=FACTS)


#: Row facts of the workloads above, in catalogue order (as runner.report.reader fills them).
FACTS = {"stor": WorkloadFacts(STOR, "throughput", "MiB/s", True),
         "retr": WorkloadFacts(RETR, "throughput", "MiB/s", True),
         "login": WorkloadFacts(LOGIN, "elapsed", "s", False)}
