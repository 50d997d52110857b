"""Report fixtures: a small hand-made campaign (two servers, three workloads, 5 samples each,
memory) as CampaignData, and the campaigns the golden exports store in PostgreSQL."""
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


# -- campaigns stored in PostgreSQL for the golden exports (test_export_golden.py) ----------

SMALL = {"clients": 10, "file_size": "256K", "transfer_size": "4M", "duration": 0.2, "op_timeout": 20,
         "phase_timeout": 60}

#: Repeats of the fixed campaign: six, the fewest whose order-statistic CI of the median
#: reaches 95% (docs/methodology.md, "The confidence interval"); the failed cell leaves
#: one row at five ([min, max], 93.75%).
REPEATS = 6

#: workload -> (primary metric, unit, base value of server 0), in the classic suite's order.
PRIMARY = {"stor": ("throughput", "MiB/s", 600.25), "retr": ("throughput", "MiB/s", 1500.5),
           "login": ("elapsed", "s", 0.25), "stor_idle": ("throughput", "MiB/s", 550.0),
           "retr_idle": ("throughput", "MiB/s", 1400.75), "retr_concurrent": ("elapsed", "s", 1.5),
           "stor_concurrent": ("elapsed", "s", 2.25), "quit": ("elapsed", "s", 0.125)}

#: server index -> level of its primary figures relative to server 0: 15% apart, more
#: than the 5% spread of the repeats, so every pair of servers differs significantly
#: (6 vs 6 wholly separated samples: exact Mann-Whitney p = 2 / C(12, 6))...
LEVEL = {0: 1.0, 1: 1.15, 2: 1.30}
#: ... except vsftpd's logins, 0.5% above server 0's: its repeats interleave with
#: server 0's, the one row of the comparison that is not significant.
NEAR = {(2, "login"): 1.005}

def _pyftpdlib_build(version: str, variant: dict, config_hash: str) -> dict:
    """The build the local backend records for pyftpdlib ``version`` run from its cached
    pip venv by the checkout's ``servers/pyftpdlib/serve.py``."""
    venv = f"/root/.cache/xferlab/venvs/pyftpdlib-{version}"
    label = f"pyftpdlib {version}" + "".join(f" [{k}={v}]" for k, v in variant.items())
    return {"name": "pyftpdlib", "version": version, "requested_version": version, "variant": variant,
            "label": label, "binary": "/work/main/servers/pyftpdlib/serve.py", "interpreter": f"{venv}/bin/python",
            "obtained": f"pip venv {venv} (cached)", "config_hash": config_hash,
            "greeting": "220 xferlab pyftpdlib ready", "max_clients": 2000, "rlimit_nofile": [20000, 20000],
            "storage": "disk", "storage_fs": "ext4", "use_sendfile": variant.get("use_sendfile", True)}


#: What the local backend recorded as each server's build (``ServerHandle.build_info``,
#: taken from a real start of each server on the lab machine with ``LocalBackend``; the
#: per-start keys ``argv``, ``pid``, ``run_dir``, ``startup_s`` and ``cpu`` left out).
BUILDS = [
    _pyftpdlib_build("2.2.0", {}, "e07140a8339ffa20c0e0511238a3b6d609d3aa6932f270bd5009647f0945e6de"),
    _pyftpdlib_build("1.5.10", {"use_sendfile": False},
                     "ca529af4210fd8e85caf27c79d1ec47afffe8539e56f196536c80799172eba72"),
    {"name": "vsftpd", "version": "3.0.3-13+b2", "requested_version": None, "variant": {},
     "label": "vsftpd 3.0.3", "binary": "/root/.cache/xferlab/debs/vsftpd/root/usr/sbin/vsftpd",
     "interpreter": None, "obtained": "debian-extract (/root/.cache/xferlab/debs/vsftpd/root)",
     "config_hash": "76186c851ef397e1d4ef7a924088b913a9c22c6b1e86e7665ef65fa9089ec93d",
     "greeting": "220 xferlab vsftpd ready", "max_clients": 2000, "rlimit_nofile": [20000, 20000],
     "password_hash": "sha512-crypt", "system_user": "xferlab-ftp", "storage": "disk", "storage_fs": "ext4"},
]


def value(server: int, workload: str, clients: int, repeat: int) -> float:
    """The primary figure of one cell: ``base * level * (1 + step / 100)``, rounded to 6
    decimals, where ``step = (5 * repeat + shift) % 6`` takes each of 0..5 once over the six
    repeats (5 is prime to 6) and ``shift`` (the workload's index in :data:`PRIMARY`,
    plus 2 for the 20-client parameter set) changes their order from row to row."""
    base = PRIMARY[workload][2]
    level = NEAR.get((server, workload), LEVEL[server])
    shift = list(PRIMARY).index(workload) + (2 if clients == 20 else 0)
    return round(base * level * (1.0 + 0.01 * ((5 * repeat + shift) % 6)), 6)


def store_fixed_campaign(engine) -> int:
    """Store the fixed campaign: 3 servers (each with the build its backend recorded,
    :data:`BUILDS`), the classic suite plus retr_concurrent with 20 clients (a second
    parameter set), :data:`REPEATS` repeats; a failed and a skipped cell; memory (tree and
    cgroup), latency, fairness, client CPU and error samples. Returns its id."""
    from sqlalchemy.orm import Session

    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    spec = parse_spec({
        "name": "golden exports", "repeats": REPEATS, "backend": "local",
        "servers": [{"name": "pyftpdlib", "version": "2.2.0"},
                    {"name": "pyftpdlib", "version": "1.5.10", "variant": {"use_sendfile": False}},
                    {"name": "vsftpd", "label": "vsftpd 3.0.3"}],
        "workloads": [{"preset": "classic", "params": SMALL},
                      {"name": "retr_concurrent", "params": {**SMALL, "clients": 20}}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        env = crud.get_or_create_environment(
            s, data={"kernel": "6.1.0-test", "cores": 2, "cpu": "Test CPU @ 2.0GHz", "backend": "local"},
            env_class="golden-env")
        builds = [crud.get_or_create_build(s, info=info) for info in BUILDS]
        cells = list(s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq))
        labels = list(dict.fromkeys(c.server_label for c in cells))
        for c in cells:
            c.status = "running"
            c.started_at = crud.now()
            idx = labels.index(c.server_label)
            if idx == 2 and c.workload == "stor_concurrent":
                crud.finish_cell(s, cell=c, status="skipped", error="skipped: vsftpd: no such binary here")
                continue
            if idx == 1 and c.workload == "retr" and c.repeat == 1:
                crud.finish_cell(s, cell=c, status="failed",
                                 error="3 failed operations (timeout=3): first timeout: 421 Timeout",
                                 build=builds[idx], environment=env)
                continue
            metric, unit, _ = PRIMARY[c.workload]
            v = value(idx, c.workload, int(c.params.get("clients", 0)), c.repeat)
            samples = [Sample(metric=metric, stat="value", value=v, unit=unit),
                       Sample(metric="errors", stat="total", value=float((c.seq % 4 == 0) * idx), unit="count"),
                       Sample(metric="client_cpu", stat="utilization",
                              value=round(0.3 + 0.2 * idx + 0.01 * c.repeat, 4), unit="ratio"),
                       Sample(metric="ops_rate", stat="value", value=round(100.0 / (1 + idx) + c.repeat, 3),
                              unit="1/s")]
            if metric == "elapsed":
                samples.append(Sample(metric="throughput", stat="value", value=round(10.0 / v, 6), unit="MiB/s"))
            if c.workload.endswith("concurrent"):
                samples += [Sample(metric="latency", stat="p50", value=round(v * 100, 3), unit="ms"),
                            Sample(metric="latency", stat="p99", value=round(v * 180, 3), unit="ms"),
                            Sample(metric="fairness", stat="jain", value=round(0.99 - 0.05 * idx, 4),
                                   unit="ratio")]
            for stat, mem in (("start", 5_000_000), ("peak", 9_000_000 + idx * 1_500_000), ("end", 8_000_000)):
                samples.append(Sample(metric="server_mem_uss", stat=stat, value=float(mem + 4096 * c.repeat),
                                      unit="bytes"))
                samples.append(Sample(metric="server_mem_rss_minus_shared", stat=stat,
                                      value=float(mem * 1.1 + 8192 * idx), unit="bytes"))
            if idx == 2:
                samples.append(Sample(metric="server_cgroup_mem", stat="peak", value=float(20_000_000 + c.seq),
                                      unit="bytes"))
            crud.finish_cell(s, cell=c, status="done", samples=samples, build=builds[idx], environment=env)
        return camp.id


#: server index -> N -> (throughput MiB/s, p99 ms, users at rate R): server 0 saturates at
#: N=4 (its p99 doubles at 8); server 1 still rises at the end of the sweep.
SWEEP = {0: {1: (100.0, 2.0, 1), 2: (190.0, 2.2, 2), 4: (380.0, 3.1, 4), 8: (385.0, 4.4, 6)},
         1: {1: (80.0, 1.0, 0), 2: (160.0, 1.1, 1), 4: (300.0, 1.2, 3), 8: (590.0, 1.5, 8)}}


def store_sweep_campaign(engine) -> int:
    """Store a saturation sweep: ``retr_sustained`` at 1, 2, 4, 8 clients on two
    servers, 2 repeats, with the figures of :data:`SWEEP` (the second repeat 1% higher).
    Returns its id."""
    from sqlalchemy.orm import Session

    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    spec = parse_spec({
        "name": "golden sweep", "repeats": 2, "backend": "local",
        "servers": [{"name": "tpd"}, {"name": "pyftpdlib", "version": "2.2.0"}],
        "workloads": [{"name": "retr_sustained", "params": {"clients": [1, 2, 4, 8], "duration": 2, "file_size": "1M",
                                                            "user_rate": "4M"}}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        env = crud.get_or_create_environment(s, data={"kernel": "6.1.0-test", "cores": 2, "backend": "local"},
                                             env_class="golden-env")
        cells = list(s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq))
        labels = list(dict.fromkeys(c.server_label for c in cells))
        for c in cells:
            c.status = "running"
            c.started_at = crud.now()
            tp, p99, users = SWEEP[labels.index(c.server_label)][c.params["clients"]]
            k = 1.0 + 0.01 * c.repeat
            samples = [Sample(metric="throughput", stat="value", value=round(tp * k, 6), unit="MiB/s"),
                       Sample(metric="ops_rate", stat="value", value=round(tp * k, 6), unit="1/s"),
                       Sample(metric="latency", stat="p50", value=round(p99 / 2, 6), unit="ms"),
                       Sample(metric="latency", stat="p99", value=round(p99 * k, 6), unit="ms"),
                       Sample(metric="service_time", stat="p99", value=round(p99 * k / 2, 6), unit="ms"),
                       Sample(metric="users_at_rate", stat="value", value=float(users), unit="count"),
                       Sample(metric="errors", stat="total", value=0.0, unit="count")]
            crud.finish_cell(s, cell=c, status="done", samples=samples, environment=env)
        return camp.id
