"""A campaign as plain data with every kind of chart of the HTML report: three servers
(the second labelled with hostile text), RETR and login on each, an N-client RETR with its
per-client curves, a memory timeline per (server, benchmark), and one server's saturation
sweep. Numbers are chosen so that every expected chart value can be written down."""
from __future__ import annotations

from runner.report.data import CampaignData, ClientCurve, MemoryTimeline, Series, WorkloadFacts

#: A server label that would be markup, or end the data's <script> element, if the report
#: inserted it as HTML.
EVIL = '</script><img src=x onerror="document.title=1">'
SERVERS = ["pyftpdlib 2.2.0", EVIL, "tpd"]
MIB = 1 << 20

#: server index -> RETR MiB/s of the three repeats, login seconds, 10-client RETR seconds.
RETR = {0: (100.0, 110.0, 120.0), 1: (200.0, 210.0, 190.0), 2: (400.0, 390.0, 410.0)}
LOGIN = {0: (2.0, 2.2, 2.1), 1: (1.0, 1.1, 1.2), 2: (0.5, 0.55, 0.6)}
CONC = {0: (4.0, 4.4, 4.2), 1: (3.0, 3.3, 3.6), 2: (2.0, 2.1, 2.2)}
#: tpd's sweep: N -> (MiB/s, p99 ms); the knee is N = 4 (p99 doubles at 8).
SWEEP = {1: (100.0, 2.0), 2: (190.0, 2.2), 4: (380.0, 3.1), 8: (385.0, 4.4)}
#: per-client rates of repeat r of server i's 10-client RETR: client k at (10 - k * (i + 1) * 0.3) MiB/s.
CLIENTS = 10


def client_rates(i: int) -> list[float]:
    """The rates of the clients of server ``i``'s cells, fastest first (MiB/s)."""
    return [10.0 - k * (i + 1) * 0.3 for k in range(CLIENTS)]


def jain(rates: list[float]) -> float:
    """Jain's index of ``rates``: (sum x)^2 / (n sum x^2)."""
    return sum(rates) ** 2 / (len(rates) * sum(x * x for x in rates))


def chart_campaign() -> CampaignData:
    """The campaign of the module docstring."""
    series: list[Series] = []
    timelines: list[MemoryTimeline] = []
    curves: list[ClientCurve] = []
    conc_title = "10 concurrent clients (RETR 1M file)"
    for i, server in enumerate(SERVERS):
        series += [Series(server, "retr", "RETR (server -> client)", "throughput", "MiB/s", True, RETR[i]),
                   Series(server, "login", "login (connect, login)", "elapsed", "s", False, LOGIN[i]),
                   Series(server, "retr_concurrent", conc_title, "elapsed", "s", False, CONC[i], "clients=10"),
                   Series(server, "retr_concurrent", conc_title, "fairness_jain", "ratio", True,
                          (jain(client_rates(i)),) * 3, "clients=10"),
                   Series(server, "retr", "RETR (server -> client)", "server_mem_uss", "bytes", False,
                          (9e6 + i * 1e6,) * 3, checkpoint="peak")]
        for w, title in (("retr", "RETR (server -> client)"), ("login", "login (connect, login)")):
            timelines.append(MemoryTimeline(server, w, "", title, 0,
                                            tuple((t * 0.1, (5 + i + t / 10) * MIB) for t in range(20))))
        for r in range(3):
            rates = client_rates(i)
            curves.append(ClientCurve(server, "retr_concurrent", "clients=10", conc_title, r, "MiB/s", jain(rates),
                                      CLIENTS, tuple((k + 1, x) for k, x in enumerate(rates))))
    for n, (tp, p99) in SWEEP.items():
        key = f"clients={n},duration=2.0"
        title = f"{n} clients RETR sustained"
        series += [Series("tpd", "retr_sustained", title, "throughput", "MiB/s", True, (tp, tp * 1.01), key),
                   Series("tpd", "retr_sustained", title, "latency_p99", "ms", False, (p99, p99 * 1.01), key)]
    workloads = {"login": WorkloadFacts("login (connect, login)", "elapsed", "s", False),
                 "retr": WorkloadFacts("RETR (server -> client)", "throughput", "MiB/s", True),
                 "retr_concurrent": WorkloadFacts(conc_title, "elapsed", "s", False),
                 "retr_sustained": WorkloadFacts("RETR sustained", "throughput", "MiB/s", True, sustained=True)}
    env = {"hostname": "lab1", "cpu_model": "Test CPU @ 2.0GHz", "cores": 2, "kernel": "6.1.0-test",
           "backend": "local"}
    return CampaignData(7, "charts", list(SERVERS), series, env, [], workloads,
                        setups={s: {"version": "1", "backend": "local"} for s in SERVERS},
                        timelines=timelines, client_curves=curves)
