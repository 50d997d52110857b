"""Read stored campaigns back as report input (runner.report.data.CampaignData).

Only cells with status ``done`` contribute samples; failed and skipped cells are
listed as failures with their reason, so a failure is visible but never averaged in.
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.catalogue.mixed import OPS
from runner.catalogue.workloads import WORKLOADS, WorkloadParams, parse_size
from runner.metrics.fairness import cv_from_jain, stored_curve
from runner.report.data import (
    CampaignData,
    CapacityResult,
    CellProfileData,
    CellTcp,
    ClientCurve,
    MemoryTimeline,
    MixedRow,
    Series,
    WorkloadFacts,
)
from runner.spec.model import secret_values
from runner.spec.redaction import scrub, scrub_data
from runner.store.models import Campaign, Cell, CellProfile, Environment, Sample, ServerBuild

#: (metric, stat) pairs exported as series, with unit and direction.
SERIES_METRICS: dict[tuple[str, str], tuple[str, bool]] = {
    ("throughput", "value"): ("MiB/s", True),
    ("elapsed", "value"): ("s", False),
    ("ops_rate", "value"): ("1/s", True),
    ("latency", "p50"): ("ms", False),
    ("latency", "p99"): ("ms", False),
    ("fairness", "jain"): ("ratio", True),
    ("fairness", "cv"): ("ratio", False),  # derived from `jain` for cells stored without it
    ("client_cpu", "utilization"): ("ratio", False),
    ("client_cpu", "runqueue_wait"): ("ratio", False),  # absent from cells stored before it was measured
    ("client_cpu", "steal"): ("ratio", False),  # likewise
    ("machine_cpu", "pressure"): ("ratio", False),  # likewise; xferlab-ftp phases on a kernel with PSI
    ("errors", "total"): ("count", False),
    ("late_sessions", "value"): ("count", False),
    # sustained load (runner.cell.samples.histogram_samples): corrected p99 above, service time, users at rate R
    ("service_time", "p99"): ("ms", False),
    ("users_at_rate", "value"): ("count", True),
    # HTTP phases (runner.cell.samples.http_samples; docs/methodology.md, "HTTP figures")
    ("requests_rate", "value"): ("req/s", True),
    ("http_requests", "network_failed"): ("count", False),
    ("http_requests", "non_2xx"): ("count", False),
    ("read_throughput", "value"): ("MiB/s", True),
    ("write_throughput", "value"): ("MiB/s", True),
    ("latency", "p95"): ("ms", False),
    # real-client processes (runner.cell.samples.process_samples): their memory and page faults
    ("client_max_rss", "max"): ("bytes", False),
    ("client_max_rss", "median"): ("bytes", False),
    ("client_page_faults", "minor"): ("count", False),
    ("client_cpu", "user"): ("s", False),
    ("client_cpu", "system"): ("s", False),
    # per-client spread (runner.metrics.fairness): MiB/s, req/s for HTTP workloads (FAIRNESS_RATES)
    ("fairness", "min_rate"): ("MiB/s", True),
    ("fairness", "p50_rate"): ("MiB/s", True),
    ("fairness", "max_rate"): ("MiB/s", True),
    # CPU cost of the work (runner.cell.samples.efficiency_samples): lower is better
    **{(f"{who}_per_{per}", "value"): (unit, False)
       for who in ("server_cpu", "client_cpu") for per, unit in (("op", "us/op"), ("gib", "s/GiB"))},
    # the process-tree cross-check of a cgroup CPU figure: (tree - cgroup) / cgroup (runner.cell.server_cpu)
    ("server_cpu", "tree_diff"): ("ratio", False),
}
MEMORY_METRICS = ("server_mem_rss_minus_shared", "server_mem_uss", "server_cgroup_mem")
MEMORY_STATS = ("start", "loaded", "end", "peak", "current", "anon")


def natural_key(text: str) -> list[str | int]:
    """Sort key reading digit runs as numbers: a sweep's ``clients=2`` before
    ``clients=16`` (plain string order puts ``clients=16`` first)."""
    return [int(t) if i % 2 else t for i, t in enumerate(re.split(r"(\d+)", text))]


def load_campaign(session: Session, *, campaign_id: int) -> CampaignData:
    """All series of a campaign, servers in spec order, with the catalogue's facts of
    its workloads (row titles, row metric, order: ``CampaignData.workloads``), so the
    report layer needs nothing but this. A cell stored with a ``fairness``/``jain``
    sample but no ``cv`` (before the CV was stored) gets its CV derived from the index,
    ``sqrt(1/J - 1)`` (runner.metrics.fairness.cv_from_jain). Each row's server CPU
    sources (``cell.server_cpu_source``, ``cgroup:phase`` for a cgroup figure over the
    whole phase) go to ``CampaignData.cpu_sources``. The failure reasons, the environment
    and the setups are scrubbed of the spec's secrets and of URL passwords
    (runner.spec.redaction.scrub_data), for every reader. Raises LookupError for an unknown id."""
    camp = session.get(Campaign, campaign_id)
    if camp is None:
        raise LookupError(f"no campaign {campaign_id}")
    secrets = secret_values(camp.spec)
    cells = session.scalars(select(Cell).where(Cell.campaign_id == campaign_id).order_by(Cell.seq)).all()
    servers: list[str] = []
    for c in cells:
        if c.server_label not in servers:
            servers.append(c.server_label)
    done = {c.id: c for c in cells if c.status == "done" and not c.profiled}  # the profiled repeat: profiles only
    values: dict[tuple, list[float]] = defaultdict(list)
    if done:
        rows = session.execute(select(Sample.cell_id, Sample.metric, Sample.stat, Sample.value)
                               .where(Sample.cell_id.in_(list(done)))
                               .order_by(Sample.cell_id)).all()
        fair: dict[int, dict[str, float]] = defaultdict(dict)  # cell id -> its jain and cv
        for cell_id, metric, stat, value in rows:
            c = done[cell_id]
            if metric == "fairness" and stat in ("jain", "cv"):
                fair[cell_id][stat] = value
                if stat == "cv":
                    continue
            values[(c.server_label, c.workload, c.params_key, metric, stat)].append(value)
        for cell_id in sorted(fair):  # cell order, as every series
            cv = fair[cell_id].get("cv")
            jain = fair[cell_id].get("jain")
            if cv is None and jain is not None and 0 < jain <= 1 + 1e-9:
                cv = cv_from_jain(jain)  # cells stored before the CV was: J = 1 / (1 + CV^2)
            if cv is not None:
                c = done[cell_id]
                values[(c.server_label, c.workload, c.params_key, "fairness", "cv")].append(cv)
    titles = {}
    facts: dict[str, WorkloadFacts] = {}
    for c in cells:
        info = WORKLOADS[c.workload]
        titles[(c.workload, c.params_key)] = title = info.title_for(WorkloadParams.model_validate(c.params))
        if c.workload not in facts:
            facts[c.workload] = WorkloadFacts(title, info.primary, info.unit, info.higher_is_better, info.sustained)
    order = {w: i for i, w in enumerate(WORKLOADS)}
    series = []
    for (server, workload, pkey, metric, stat), vals in values.items():
        title = titles[(workload, pkey)]
        if (metric, stat) in SERIES_METRICS:
            unit, hib = SERIES_METRICS[(metric, stat)]
            if metric == "fairness" and stat.endswith("_rate") and WORKLOADS[workload].protocol == "http":
                unit = "req/s"  # runner.metrics.fairness.client_rates: requests per second per HTTP client
            name = metric if stat == "value" else f"{metric}_{stat}"
            series.append(Series(server, workload, title, name, unit, hib, tuple(vals), pkey))
        elif metric in MEMORY_METRICS and stat in MEMORY_STATS:
            series.append(Series(server, workload, title, metric, "bytes", False, tuple(vals), pkey, checkpoint=stat))
    series.sort(key=lambda s: (order.get(s.workload, 99), natural_key(s.params_key), servers.index(s.server), s.metric,
                               s.checkpoint or ""))
    failures = [(c.server_label, c.workload, c.repeat, scrub(c.error, secrets) or c.status) for c in cells
                if c.status in ("failed", "skipped")]
    env = {}
    env_id = next((c.environment_id for c in cells if c.environment_id), None)
    if env_id is not None:
        row = session.get(Environment, env_id)
        if row is not None:
            env = dict(row.data)
            env["env_class"] = row.env_class
        drivers: list[Any] = []  # a workload may name its own driver (seed 004): every driver the cells used
        for other in dict.fromkeys(c.environment_id for c in cells if c.environment_id):
            erow = session.get(Environment, other)
            rec = (erow.data or {}).get("driver") if erow is not None else None
            if rec and rec not in drivers:
                drivers.append(rec)
        if len(drivers) > 1:
            env["drivers"] = drivers
    workloads = {w: facts[w] for w in sorted(facts, key=lambda w: order.get(w, 99))}
    sources: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for c in done.values():
        if c.server_cpu_source:  # a whole-phase cgroup figure says so: "cgroup:phase"
            whole = c.server_cpu_window == "phase" and c.server_cpu_source != "tree"
            text = c.server_cpu_source + (":phase" if whole else "")
            sources[(c.server_label, c.workload, c.params_key)].append(text)
    return CampaignData(campaign_id=camp.id, name=camp.name, servers=servers, series=series,
                        environment=scrub_data(env, secrets), failures=failures, workloads=workloads,
                        setups=scrub_data(_setups(session, cells), secrets),
                        cpu_sources={k: tuple(v) for k, v in sources.items()},
                        timelines=_timelines(session, done, titles),
                        client_curves=_client_curves(session, done, titles),
                        tcp=_tcp(session, cells, titles), mixed=_mixed(session, done, titles, servers),
                        profiles=_profiles(session, cells, titles, secrets),
                        capacity=_capacity(session, cells, titles))


#: Most points of one memory timeline and of one per-client curve in CampaignData: enough
#: for a chart a few hundred pixels wide, small enough for a report of 50 cells.
MAX_TIMELINE_POINTS = 150
MAX_CURVE_POINTS = 100


def _thin(n: int, limit: int) -> list[int]:
    """Indices of ``limit`` evenly spaced items of ``n`` (every index when ``n <= limit``),
    the first and the last kept."""
    if n <= limit:
        return list(range(n))
    return sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})


def _timelines(session: Session, done: dict[int, Cell], titles: dict) -> list[MemoryTimeline]:
    """The memory timeline (raw of the peak ``server_mem_uss`` sample: ``[[t_s, uss,
    rss_minus_shared, nprocs], ...]``) of the first ``done`` cell of each (server, workload,
    parameters) that stored one, thinned to :data:`MAX_TIMELINE_POINTS`. A malformed list is
    left out."""
    if not done:
        return []
    rows = session.execute(select(Sample.cell_id, Sample.raw).where(
        Sample.cell_id.in_(list(done)), Sample.metric == "server_mem_uss", Sample.stat == "peak",
        Sample.raw.is_not(None))).all()
    out: dict[tuple[str, str, str], MemoryTimeline] = {}
    for cell_id, raw in sorted(rows, key=lambda r: done[r[0]].seq):
        c = done[cell_id]
        key = (c.server_label, c.workload, c.params_key)
        if key in out or not isinstance(raw, list):
            continue
        try:
            points = tuple((float(raw[i][0]), float(raw[i][1])) for i in _thin(len(raw), MAX_TIMELINE_POINTS))
        except (TypeError, ValueError, IndexError):
            continue
        if points:
            out[key] = MemoryTimeline(*key, titles[(c.workload, c.params_key)], c.repeat, points)
    return list(out.values())


def _client_curves(session: Session, done: dict[int, Cell], titles: dict) -> list[ClientCurve]:
    """The per-client rates (raw of each ``fairness``/``jain`` sample: ``[[bytes or requests,
    seconds, ok], ...]``) of the ``done`` cells, sorted fastest first and thinned to
    :data:`MAX_CURVE_POINTS`, in cell order. A malformed list is left out."""
    if not done:
        return []
    rows = session.execute(select(Sample.cell_id, Sample.raw).where(
        Sample.cell_id.in_(list(done)), Sample.metric == "fairness", Sample.stat == "jain",
        Sample.raw.is_not(None))).all()
    out = []
    for cell_id, raw in sorted(rows, key=lambda r: done[r[0]].seq):
        c = done[cell_id]
        got = stored_curve(raw, http=WORKLOADS[c.workload].protocol == "http")
        if got is None:
            continue
        figs, curve = got
        points = tuple((i + 1, curve[i]) for i in _thin(len(curve), MAX_CURVE_POINTS))
        out.append(ClientCurve(c.server_label, c.workload, c.params_key, titles[(c.workload, c.params_key)],
                               c.repeat, figs.rate_unit, figs.jain, figs.clients, points))
    return out


def _tcp(session: Session, cells, titles: dict[tuple[str, str], str]) -> list[CellTcp]:
    """The stored kernel TCP counters (metric ``tcp``) and listen backlog (metric
    ``listen_backlog``) of the done and failed ``cells``: one :class:`CellTcp` per cell
    with a non-zero counter or a backlog, in the order of ``cells``."""
    measured = {c.id: c for c in cells if c.status in ("done", "failed")}
    if not measured:
        return []
    per: dict[int, tuple[dict[str, int], list[int]]] = defaultdict(lambda: ({}, []))
    rows = session.execute(select(Sample.cell_id, Sample.metric, Sample.stat, Sample.value)
                           .where(Sample.cell_id.in_(list(measured)), Sample.metric.in_(("tcp", "listen_backlog")))
                           .order_by(Sample.id)).all()
    for cell_id, metric, stat, value in rows:
        counters, backlog = per[cell_id]
        if metric == "tcp" and value:
            counters[stat] = int(value)
        elif metric == "listen_backlog":
            backlog.append(int(value))
    out = []
    for c in cells:
        if c.id not in per or not (per[c.id][0] or per[c.id][1]):
            continue
        counters, backlog = per[c.id]
        out.append(CellTcp(c.server_label, c.workload, titles[(c.workload, c.params_key)], c.params_key, c.repeat,
                           c.status, counters, min(backlog) if backlog else None))
    return out


_STEP_KEY_RE = re.compile(r"(?:^|,)(?:clients|rate)=[^,]*")


def _capacity(session: Session, cells, titles: dict[tuple[str, str], str]) -> list[CapacityResult]:
    """The ended capacity searches of ``cells`` (sample ``capacity``/``users`` with its
    summary as raw; runner.campaign.capacity), in cell order."""
    by_id = {c.id: c for c in cells}
    if not by_id:
        return []
    rows = session.execute(select(Sample.cell_id, Sample.value, Sample.raw).where(
        Sample.cell_id.in_(list(by_id)), Sample.metric == "capacity", Sample.stat == "users")).all()
    got = {cell_id: (value, raw) for cell_id, value, raw in rows}
    return [CapacityResult(c.server_label, c.workload, titles[(c.workload, c.params_key)],
                           _STEP_KEY_RE.sub("", c.params_key).strip(","), int(got[c.id][0]), dict(got[c.id][1] or {}))
            for c in cells if c.id in got]


def load_cell_profile(session: Session, *, cell_id: int) -> CellProfileData:
    """The stored server CPU profile of cell ``cell_id`` (notes scrubbed of its campaign's
    secrets). Raises LookupError naming the cell when there is no such cell or it was
    not profiled."""
    cell = session.get(Cell, cell_id)
    if cell is None:
        raise LookupError(f"no cell {cell_id}")
    camp = session.get(Campaign, cell.campaign_id)
    secrets = secret_values(camp.spec) if camp is not None else frozenset()
    title = WORKLOADS[cell.workload].title_for(WorkloadParams.model_validate(cell.params))
    found = _profiles(session, [cell], {(cell.workload, cell.params_key): title}, secrets, any_status=True)
    if not found:
        raise LookupError(f"cell {cell_id} ({cell.server_label} · {cell.workload}, {cell.status}) has no profile: "
                          "profiled cells are those of a spec, workload or server with `profile:`, or "
                          "`xferlab run --profile`")
    return found[0]


def _profiles(session: Session, cells, titles: dict[tuple[str, str], str], secrets, *,
              any_status: bool = False) -> list[CellProfileData]:
    """The stored server CPU profiles of the done and failed ``cells`` (of every cell with
    ``any_status``), in their order; the notes scrubbed of ``secrets``."""
    measured = {c.id: c for c in cells if any_status or c.status in ("done", "failed")}
    if not measured:
        return []
    rows = {p.cell_id: p for p in session.scalars(select(CellProfile).where(CellProfile.cell_id.in_(list(measured))))}
    out = []
    for c in cells:
        p = rows.get(c.id)
        if p is None:
            continue
        out.append(CellProfileData(
            cell_id=c.id, server=c.server_label, workload=c.workload, title=titles[(c.workload, c.params_key)],
            params_key=c.params_key, repeat=c.repeat, status=c.status, profiler=p.profiler,
            profiler_version=p.profiler_version, rate_hz=p.rate_hz, duration_s=p.duration_s, on_cpu=p.on_cpu,
            off_cpu=p.off_cpu, on_cpu_s=p.on_cpu_s, off_cpu_s=p.off_cpu_s,
            syscalls=tuple(dict(r) for r in p.syscalls or ()),
            notes=tuple(scrub(str(n), secrets) or "" for n in p.notes or ())))
    return out


_MIXED_METRICS = ("elapsed", "op_count", "ops_rate", "throughput", "latency", "service_time", "op_errors",
                  "bucket_ops", "bucket_bytes", "bucket_latency")


def _mixed(session: Session, done: dict[int, Cell], titles: dict[tuple[str, str], str],
           servers: list[str]) -> list[MixedRow]:
    """The per-operation and per-bucket rows (runner.report.data.MixedRow) of the done
    ``mixed`` cells: each figure the median over the repeats, errors summed; in parameter
    order, then the campaign's server order, operations before buckets."""
    cells = {i: c for i, c in done.items() if c.workload == "mixed"}
    if not cells:
        return []
    rows = session.execute(select(Sample.cell_id, Sample.metric, Sample.stat, Sample.value)
                           .where(Sample.cell_id.in_(list(cells)), Sample.metric.in_(_MIXED_METRICS))).all()
    per: dict[int, dict[tuple[str, str], dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    elapsed: dict[int, float] = {}
    for cell_id, metric, stat, value in rows:
        fig = per[cell_id]
        if metric == "elapsed":
            elapsed[cell_id] = value
        elif metric == "op_count":
            fig[("op", stat)]["ops"] = value
        elif metric in ("ops_rate", "throughput") and stat != "value":
            fig[("op", stat)]["rate" if metric == "ops_rate" else "mib"] = value
        elif metric in ("latency", "service_time") and ":" in stat:
            op, q = stat.split(":", 1)
            fig[("op", op)][q if metric == "latency" else f"service_{q}"] = value
        elif metric == "op_errors":
            d = fig[("op", stat.split(":", 1)[0])]
            d["errors"] = d.get("errors", 0.0) + value
        elif metric == "bucket_ops":
            fig[("bucket", stat)]["ops"] = value
        elif metric == "bucket_bytes":
            fig[("bucket", stat)]["bytes"] = value
        elif metric == "bucket_latency":
            b, q = stat.rsplit(":", 1)
            fig[("bucket", b)][q] = value
    groups: dict[tuple[str, str, str, str, str], list[dict[str, float]]] = defaultdict(list)
    for cell_id, figs in per.items():
        c = cells[cell_id]
        el = elapsed.get(cell_id, 0.0)
        for (group, name), d in figs.items():
            if group == "bucket" and el > 0:
                d["rate"] = d.get("ops", 0.0) / el
                d["mib"] = d.get("bytes", 0.0) / (1 << 20) / el
            groups[(c.server_label, c.workload, c.params_key, group, name)].append(d)

    def med(ds: list[dict[str, float]], k: str) -> float | None:
        vals = sorted(d[k] for d in ds if k in d)
        if not vals:
            return None
        mid = len(vals) // 2
        return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2

    out = [MixedRow(server, workload, titles[(workload, pkey)], pkey, group, name, len(ds), med(ds, "ops") or 0.0,
                    med(ds, "rate") or 0.0, med(ds, "mib") or 0.0, med(ds, "p50"), med(ds, "p99"), med(ds, "p99.9"),
                    int(sum(d.get("errors", 0.0) for d in ds)), med(ds, "service_p99"))
           for (server, workload, pkey, group, name), ds in groups.items()]
    order = {op: i for i, op in enumerate(("login", *OPS))}
    out.sort(key=lambda r: (natural_key(r.params_key), servers.index(r.server), r.group != "op",
                            order.get(r.name, 99) if r.group == "op" else _bucket_bytes(r.name)))
    return out


def _bucket_bytes(label: str) -> float:
    try:
        return float(parse_size(label.split("-")[0]))
    except ValueError:
        return float("inf")


#: Build-info keys shown as a server's setup (runner.report.context.setup_table).
SETUP_KEYS = ("version", "backend", "obtained", "config_hash", "variant", "storage", "storage_fs", "network",
              "image_tag", "binary")


def _setups(session: Session, cells) -> dict[str, dict]:
    """Server label -> the setup keys of the build its first measured cell ran."""
    out: dict[str, dict] = {}
    for c in cells:
        if c.server_label in out or c.build_id is None or c.status != "done":
            continue
        build = session.get(ServerBuild, c.build_id)
        if build is not None:
            info = {**(build.info or {}), "version": build.version or (build.info or {}).get("version"),
                    "variant": build.variant, "config_hash": build.config_hash}
            out[c.server_label] = {k: info.get(k) for k in SETUP_KEYS if info.get(k) not in (None, "", {})}
    return out


def latest_campaign_id(session: Session) -> int | None:
    """Id of the most recent campaign, or None when the store is empty."""
    return session.scalar(select(Campaign.id).order_by(Campaign.id.desc()).limit(1))


def campaign_timing(session: Session, *, campaign_id: int) -> dict[str, Any]:
    """Where a campaign's time went, from its cells' ``cell_time`` samples
    (runner.catalogue.stages.STAGES).

    Returns ``{"stages": [{"stage", "cells", "total_s", "median_s"}, ...]`` in STAGES
    order, ``"cells_s"``: the sum of the cells' wall times (claimed to finished),
    ``"campaign_s"``: the campaign's wall time (started to finished, or to now when
    running; None when it never started), ``"cells"``: cells with timing, ``"servers"``:
    per server label, ``[{"server", "cells", "stages": {stage: total_s}}, ...]`` in the
    order the servers first ran}. Raises LookupError for an unknown id."""
    import statistics
    from datetime import UTC, datetime

    from runner.catalogue.stages import STAGES

    camp = session.get(Campaign, campaign_id)
    if camp is None:
        raise LookupError(f"no campaign {campaign_id}")
    rows = session.execute(select(Sample.cell_id, Sample.stat, Sample.value, Cell.server_label).join(Cell).where(
        Cell.campaign_id == campaign_id, Sample.metric == "cell_time").order_by(Cell.started_at)).all()
    per: dict[str, list[float]] = defaultdict(list)
    servers: dict[str, dict[str, Any]] = {}
    for cell_id, stage, value, label in rows:
        per[stage].append(float(value))
        srv = servers.setdefault(label, {"server": label, "cell_ids": set(), "stages": defaultdict(float)})
        srv["cell_ids"].add(cell_id)
        srv["stages"][stage] += float(value)
    stages = [{"stage": k, "cells": len(per[k]), "total_s": sum(per[k]), "median_s": statistics.median(per[k])}
              for k in STAGES if per.get(k)]
    cells = session.execute(select(Cell.started_at, Cell.finished_at).where(
        Cell.campaign_id == campaign_id, Cell.started_at.is_not(None), Cell.finished_at.is_not(None))).all()
    cells_s = sum(((f - s).total_seconds() for s, f in cells if s is not None and f is not None), 0.0)
    end = camp.finished_at or datetime.now(UTC)
    campaign_s = (end - camp.started_at).total_seconds() if camp.started_at else None
    return {"stages": stages, "cells_s": cells_s, "campaign_s": campaign_s,
            "cells": len({r[0] for r in rows}),
            "servers": [{"server": v["server"], "cells": len(v["cell_ids"]), "stages": dict(v["stages"])}
                        for v in servers.values()]}

