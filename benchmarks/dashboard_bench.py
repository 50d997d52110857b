"""Dashboard benchmark: server time of the comparison page and the history API with
1,080,000 stored samples.

THE DATA IS SYNTHETIC: generated here (random figures around plausible medians), loaded
with PostgreSQL COPY into a separate database ``xferlab_bench_synthetic`` on the same
server as XFERLAB_DATABASE_URL (or the embedded PostgreSQL); every campaign is named
"SYNTHETIC ...". It measures the dashboard's queries, not any FTP server.

Shape: 250 campaigns x 4 server builds x 8 workloads (classic suite) x 5 repeats =
40,000 cells x 27 samples = 1,080,000 samples (the uss peak sample carries a
30-point memory timeline, as real cells do; the server and client CPU per unit of
work are the 26th and 27th).

Usage::

    .venv/bin/python benchmarks/dashboard_bench.py            # reuse the data if present
    .venv/bin/python benchmarks/dashboard_bench.py --fresh    # regenerate it
    .venv/bin/python benchmarks/dashboard_bench.py --drop     # remove the database

Prints the median and max server time (ms, from the app's Server-Timing header, over
``--runs`` requests after one warm-up) against the targets: comparison page < 200 ms,
history API < 100 ms, regressions API (default window: the 50 most recent campaigns,
primary, peak-memory and server CPU per unit of work series) < 200 ms. Server time is wall time: on a shared,
loaded machine it is inflated; compare figures taken in the same run only.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DB_NAME = "xferlab_bench_synthetic"
N_CAMPAIGNS, REPEATS = 250, 5
SERVERS = [("pyftpdlib", "2.2.0", {}), ("pyftpdlib", "2.2.0", {"use_sendfile": False}),
           ("twisted", "24.11.0", {}), ("tpd", "", {})]
PARAMS = {"clients": 300, "file_size": 10 << 20, "transfer_size": 256 << 20, "duration": 3.0}
TARGETS_MS = {"comparison page": 200.0, "history API": 100.0, "regressions API": 200.0}


def _urls(fresh: bool, drop: bool) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    from runner.store.db import database_url

    admin_url = database_url()
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        exists = c.scalar(text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": DB_NAME})
        if exists and (fresh or drop):
            c.execute(text(f'DROP DATABASE "{DB_NAME}" WITH (FORCE)'))
            exists = False
        if not exists and not drop:
            c.execute(text(f'CREATE DATABASE "{DB_NAME}"'))
    admin.dispose()
    return make_url(admin_url).set(database=DB_NAME).render_as_string(hide_password=False)


def _copy(conn, table: str, columns: list[str], rows) -> None:
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
        for row in rows:
            cp.write_row(row)


def generate(engine) -> None:
    """Load the synthetic data (see the module docstring) with COPY, then the history
    points derived from it (runner.store.points.rebuild_points). Prints how long each took."""
    from sqlalchemy import text

    from runner.catalogue.workloads import CLASSIC_SUITE, WORKLOADS, WorkloadParams, params_key
    from runner.spec.model import ServerSpec

    t0 = time.perf_counter()
    rnd = random.Random(20261122)
    crnd = random.Random(20261123)
    wp = WorkloadParams(**PARAMS)
    params_json = json.dumps(wp.model_dump(mode="json"))
    servers = [ServerSpec(name=n, version=v or None, variant=var) for n, v, var in SERVERS]
    spec = {"name": "SYNTHETIC", "repeats": REPEATS, "servers": [s.model_dump(mode="json") for s in servers],
            "workloads": [{"preset": "classic", "params": PARAMS}], "backend": "local"}
    base = {"stor": 600.0, "retr": 1700.0, "login": 0.1, "stor_idle": 550.0, "retr_idle": 1600.0,
            "retr_concurrent": 1.5, "stor_concurrent": 1.65, "quit": 0.05}
    raw = psy = engine.raw_connection()
    try:
        conn = psy.driver_connection
        with conn.cursor() as cur:
            cur.execute("INSERT INTO environment (id, digest, env_class, data) VALUES "
                        "(1, 'synthetic-a', 'synthA', '{\"synthetic\": true}'), "
                        "(2, 'synthetic-b', 'synthB', '{\"synthetic\": true, \"kernel\": \"other\"}')")
            cur.executemany(
                "INSERT INTO campaign (id, name, spec, status, backend, cells_total, cells_done, cells_failed, "
                "cells_skipped, lab_version, created_at, started_at, finished_at) VALUES "
                "(%s, %s, %s, 'done', 'local', %s, %s, 0, 0, 'synthetic', now() - make_interval(hours => %s), "
                "now() - make_interval(hours => %s), now() - make_interval(hours => %s))",
                [(i, f"SYNTHETIC benchmark data #{i}", json.dumps(spec), 160, 160, N_CAMPAIGNS - i + 1,
                  N_CAMPAIGNS - i + 1, N_CAMPAIGNS - i) for i in range(1, N_CAMPAIGNS + 1)])
        cells, samples = [], []
        cell_id = sample_id = 0
        timeline = json.dumps([[round(t * 0.1, 1), 9_000_000 + t * 1000, 8_000_000 + t * 1000, 1] for t in range(30)])
        for cid in range(1, N_CAMPAIGNS + 1):
            env_id = 1 if cid <= 200 else 2  # an environment change at campaign 201
            slow = 1.15 if cid > 120 else 1.0  # a regression at campaign 121 (all series)
            seq = 0
            for rep in range(REPEATS):
                for w in CLASSIC_SUITE:
                    info = WORKLOADS[w]
                    pkey = params_key(w, wp)
                    for si, srv in enumerate(servers):
                        cell_id += 1
                        label = srv.display()
                        cells.append((cell_id, cid, seq, srv.name, srv.version or "", json.dumps(srv.variant), label,
                                      srv.model_dump_json(), w, params_json, pkey, rep, "done", env_id))
                        seq += 1
                        m = base[w] * (1 + 0.1 * si)
                        v = (m / slow if info.higher_is_better else m * slow) * rnd.gauss(1, 0.02)
                        elapsed = 3.0 if info.primary == "throughput" else v
                        figs = [("elapsed", "value", elapsed, "s"), ("bytes", "value", 1e9, "bytes"),
                                ("ops_rate", "value", 300 / elapsed, "1/s"),
                                ("latency", "p50", 1.0, "ms"), ("latency", "p90", 2.0, "ms"),
                                ("latency", "p99", 4.0, "ms"), ("latency", "max", 9.0, "ms"),
                                ("errors", "total", 0.0, "count"), ("fairness", "jain", 0.99, "ratio"),
                                ("fairness", "min_time", 1.0, "s"), ("fairness", "max_time", 1.2, "s"),
                                ("client_cpu", "user", 0.5, "s"), ("client_cpu", "system", 0.5, "s"),
                                ("client_cpu", "utilization", 0.4, "ratio"), ("server_cpu", "user", 0.4, "s"),
                                ("server_cpu", "system", 0.6, "s")]
                        figs.append(("throughput", "value", v, "MiB/s") if info.primary == "throughput"
                                    else ("throughput", "value", 1e9 / 2**20 / v, "MiB/s"))
                        for stat, mem in (("start", 6e6), ("loaded", 8e6), ("end", 7e6), ("peak", 9e6)):
                            figs.append(("server_mem_uss", stat, mem * rnd.gauss(1, 0.01), "bytes"))
                            figs.append(("server_mem_rss_minus_shared", stat, mem * 1.1, "bytes"))
                        # CPU per unit of work, as runner.cell.samples.efficiency_samples stores it (1 s of CPU
                        # each side; 300 operations for logins and QUITs, else the bytes moved); the
                        # server's gets the regression too. Own generator: the figures above stay as they were.
                        unit_, per = (("us/op", 1e6 / 300) if w in ("login", "quit") else ("s/GiB", 2**30 / 1e9))
                        suffix = "op" if unit_ == "us/op" else "gib"
                        figs.append((f"server_cpu_per_{suffix}", "value", per * slow * crnd.gauss(1, 0.02), unit_))
                        figs.append((f"client_cpu_per_{suffix}", "value", per * crnd.gauss(1, 0.02), unit_))
                        for metric, stat, value, unit in figs:
                            sample_id += 1
                            r = timeline if (metric, stat) == ("server_mem_uss", "peak") else None
                            samples.append((sample_id, cell_id, metric, stat, float(value), unit, r))
        _copy(conn, "cell", ["id", "campaign_id", "seq", "server", "server_version", "variant", "server_label",
                             "server_spec", "workload", "params", "params_key", "repeat", "status",
                             "environment_id"], cells)
        _copy(conn, "sample", ["id", "cell_id", "metric", "stat", "value", "unit", "raw"], samples)
        with conn.cursor() as cur:
            cur.execute("UPDATE cell SET started_at = now() - interval '2 s', finished_at = now()")
            for table in ("campaign", "cell", "sample", "environment"):
                cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
            cur.execute("ANALYZE")
        conn.commit()
    finally:
        raw.close()
    print(f"generated SYNTHETIC data: {N_CAMPAIGNS} campaigns, {len(cells):,} cells, {len(samples):,} samples "
          f"in {time.perf_counter() - t0:.1f} s")
    # COPY bypassed finish_cell, which keeps the history points: compute them all at once
    from sqlalchemy.orm import Session

    from runner.store.points import rebuild_points

    t0 = time.perf_counter()
    with Session(engine) as s:
        n = rebuild_points(s)
        s.execute(text("ANALYZE series_point"))
        s.commit()
    print(f"history points (series_point): {n:,} rows in {time.perf_counter() - t0:.1f} s")


def _time(client, url: str, runs: int) -> list[float]:
    out = []
    for i in range(runs + 1):
        r = client.get(url)
        if r.status_code != 200:
            raise SystemExit(f"{url}: HTTP {r.status_code}: {r.text[:300]}")
        ms = float(r.headers["server-timing"].split("dur=")[1])
        if i:  # the first request warms caches
            out.append(ms)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns 0 when both targets are met, 1 otherwise."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fresh", action="store_true", help="regenerate the synthetic data")
    ap.add_argument("--drop", action="store_true", help="drop the synthetic database and exit")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)
    url = _urls(args.fresh, args.drop)
    if args.drop:
        print(f"dropped {DB_NAME}")
        return 0
    from fastapi.testclient import TestClient
    from sqlalchemy import func, select
    from sqlalchemy.orm import Session

    from dashboard.app import create_app
    from dashboard.settings import DashboardSettings
    from runner.store.db import get_engine
    from runner.store.models import Sample

    engine = get_engine(url=url)
    with Session(engine) as s:
        n = s.scalar(select(func.count()).select_from(Sample))
    if n == 0:
        generate(engine)
        with Session(engine) as s:
            n = s.scalar(select(func.count()).select_from(Sample))
    print(f"database {DB_NAME}: {n:,} samples (SYNTHETIC)")
    from urllib.parse import urlencode

    from runner.catalogue.workloads import WorkloadParams, params_key

    cid = N_CAMPAIGNS
    a, b = "pyftpdlib 2.2.0", "pyftpdlib 2.2.0 [use_sendfile=False]"
    urls = {
        "comparison page": "/compare?" + urlencode({"campaign": cid, "a": a, "b": b}),
        "history API": "/api/history?" + urlencode({"server": "pyftpdlib", "track": "{}", "workload": "retr",
                                                     "params_key": params_key("retr", WorkloadParams(**PARAMS))}),
        "comparison of two campaigns (page)": "/compare?" + urlencode({"a": f"{cid - 1}:{a}", "b": f"{cid}:{a}"}),
        # 128 series: 32 primary figures, 64 peak-memory and 32 server-CPU-per-unit-of-work series,
        # points of the 50 most recent campaigns
        "regressions API": "/api/regressions",
        "regressions API, whole history": "/api/regressions?window=2000",
        "campaign page": f"/campaigns/{cid}",
    }
    ok = True
    with TestClient(create_app(DashboardSettings(), engine=engine)) as client:
        for name, u in urls.items():
            runs = args.runs if "regressions" not in name else max(3, args.runs // 5)
            ms = _time(client, u, runs)
            target = TARGETS_MS.get(name)
            verdict = ""
            if target is not None:
                good = statistics.median(ms) < target
                ok &= good
                verdict = f"  target < {target:.0f} ms: {'OK' if good else 'MISSED'}"
            print(f"{name:38s} median {statistics.median(ms):7.1f} ms  max {max(ms):7.1f} ms  "
                  f"({len(ms)} runs){verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
