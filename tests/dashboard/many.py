"""Many stored campaigns at once, fast: ``store_many`` writes N finished campaigns of ten
servers through the store (runner.store.campaigns creates each campaign and its cells,
the samples go in with one INSERT per campaign, the progress is counted by
``refresh_progress`` and the history points by one ``rebuild_points``), without running
anything. The dashboard's pages are checked at the scale a lab reaches after weeks."""
from __future__ import annotations

import math
import random

from sqlalchemy import insert, update
from sqlalchemy.orm import Session

#: Ten server entries of six FTP servers, each its own history track (runner.history): a
#: label or variant options set the older versions apart, as a lab following two release
#: lines would (versions alone would be points of one series).
TEN_SERVERS = [
    {"name": "pyftpdlib", "version": "1.5.10", "label": "pyftpdlib-1.5"}, {"name": "pyftpdlib", "version": "2.2.0"},
    {"name": "pyftpdlib", "version": "2.2.0", "variant": {"use_sendfile": False}},
    {"name": "twisted", "version": "24.11.0", "label": "twisted-24"}, {"name": "twisted", "version": "26.10.0"},
    {"name": "tpd"}, {"name": "tpd", "variant": {"use_sendfile": False}},
    {"name": "vsftpd"}, {"name": "proftpd"}, {"name": "pureftpd"},
]
WORKLOADS = ("stor", "retr", "login")
PARAMS = {"clients": 10, "file_size": "256K", "transfer_size": "4M", "duration": 0.2}
#: Base figure of server entry i for each workload: MiB/s for STOR and RETR, s for logins.
BASE = {"stor": 400.0, "retr": 900.0, "login": 0.5}
#: The campaign from which server entry 2's RETR is 40% slower (a step the sparkline shows).
STEP_AT = 40


def figure(server: int, workload: str, campaign: int, repeat: int) -> float:
    """The stored primary figure of server entry ``server`` in campaign number
    ``campaign`` (0-based) and ``repeat``: a slow wave of +-10% over the campaigns, 4%
    repeat noise (fixed seed: the CI whiskers of the compare page show), and server 2's RETR
    40% lower from :data:`STEP_AT` on."""
    noise = random.Random(f"{server}:{workload}:{campaign}:{repeat}").uniform(-0.04, 0.04)
    v = BASE[workload] * (1 + server / 10) * (1 + 0.1 * math.sin(campaign / 5 + server)) * (1 + noise)
    if server == 2 and workload == "retr" and campaign >= STEP_AT:
        v *= 0.6
    return v


def store_many(engine, campaigns: int = 50, repeats: int = 5) -> list[int]:
    """Store ``campaigns`` finished campaigns of :data:`TEN_SERVERS` x :data:`WORKLOADS` x
    ``repeats``, every cell ``done`` with its primary figure (:func:`figure`), the peak
    server memory (USS, rss - shared) and the server CPU per unit of work; then rebuild
    the history points. Returns the campaign ids, oldest first."""
    from runner.catalogue.workloads import WORKLOADS as INFO
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample
    from runner.store.points import rebuild_points

    spec = parse_spec({"name": "many", "repeats": repeats, "servers": TEN_SERVERS, "backend": "local",
                       "workloads": [{"name": w, "params": PARAMS} for w in WORKLOADS]})
    labels = [s.display() for s in spec.servers]
    ids = []
    with Session(engine, expire_on_commit=False) as s:
        env = crud.get_or_create_environment(s, data={"kernel": "envA"}, env_class="envA")
        for n in range(campaigns):
            camp = crud.create_campaign(s, spec=spec.model_copy(update={"name": f"many {n + 1}"}), backend="local")
            s.flush()
            ids.append(camp.id)
            at = crud.now()
            s.execute(update(Cell).where(Cell.campaign_id == camp.id)
                      .values(status="done", started_at=at, finished_at=at, environment_id=env.id))
            rows = []
            for cell_id, label, workload, repeat in s.query(Cell.id, Cell.server_label, Cell.workload, Cell.repeat) \
                    .filter(Cell.campaign_id == camp.id):
                i = labels.index(label)
                info = INFO[workload]
                per, unit = ("op", "us/op") if workload == "login" else ("gib", "s/GiB")
                rows += [
                    {"cell_id": cell_id, "metric": info.primary, "stat": "value",
                     "value": figure(i, workload, n, repeat), "unit": info.unit},
                    {"cell_id": cell_id, "metric": "server_mem_uss", "stat": "peak",
                     "value": (8 + i) * 2**20 * (1 + repeat / 200), "unit": "bytes"},
                    {"cell_id": cell_id, "metric": "server_mem_rss_minus_shared", "stat": "peak",
                     "value": (7 + i) * 2**20, "unit": "bytes"},
                    {"cell_id": cell_id, "metric": f"server_cpu_per_{per}", "stat": "value",
                     "value": (40.0 if per == "op" else 0.3) * (1 + i / 10) * (1 + repeat / 100), "unit": unit}]
            s.execute(insert(Sample), rows)
            crud.refresh_progress(s, campaign_id=camp.id)
            s.commit()
        rebuild_points(s)
        s.commit()
    return ids
