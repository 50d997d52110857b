"""Merging the per-host results of one multi-host phase (runner.multihost docstring,
docs/methodology.md): clients split over hosts, results combined into one PhaseResult,
one ``client_host`` sample per host."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.load import hdr
from runner.load.result import OpFigures, PhaseResult

if TYPE_CHECKING:
    from runner.store.models import Sample


def split_clients(n: int, hosts: int) -> list[int]:
    """Split ``n`` clients over ``hosts`` hosts as evenly as possible, earlier hosts
    taking the remainder: ``split_clients(300, 2) == [150, 150]``,
    ``split_clients(5, 2) == [3, 2]``. Raises ValueError for ``hosts < 1``."""
    if hosts < 1:
        raise ValueError("need at least one client host")
    return [n // hosts + (1 if i < n % hosts else 0) for i in range(hosts)]


def client_shares(workload: str, clients: int, hosts: int) -> list[int]:
    """Clients each of ``hosts`` load hosts runs for ``workload``: the catalogue's
    ``client_split`` ``per_host`` gives every host all ``clients`` (one transfer stream
    per host; clients plays no part), ``split`` divides them (:func:`split_clients`)."""
    if WORKLOADS[workload].client_split == "per_host":
        return [clients] * hosts
    return split_clients(clients, hosts)


def host_params(workload: str, params: WorkloadParams, share: int, index: int = 0) -> WorkloadParams:
    """The WorkloadParams client host (or process) number ``index`` (0-based) runs:
    ``params`` with ``clients = share`` (its part of the N clients, or of the idle sessions
    of ``*_idle``); the open-loop ``rate`` of a sustained workload (operations/s over all
    clients) becomes the host's part of it, ``rate x share / clients``, so the hosts together
    keep the spec's rate; the ``mixed`` workload's ``seed`` becomes ``seed + index`` (mod
    2**63), so the hosts' clients draw different sequences, each reproducible."""
    update: dict[str, float | int] = {"clients": share}
    if params.rate is not None and WORKLOADS[workload].sustained and share > 0:
        update["rate"] = params.rate * share / params.clients
    if workload == "mixed":
        update["seed"] = (params.seed + index) % (1 << 63)
    return params.model_copy(update=update)


def _merge_figures(parts: list[dict[str, OpFigures]]) -> dict[str, OpFigures]:
    """Per-kind (or per-bucket) figures of several sources added: counts and bytes summed,
    errors summed by kind, HDR histograms added (exact)."""
    out: dict[str, OpFigures] = {}
    for key in dict.fromkeys(k for d in parts for k in d):
        figs = [d[key] for d in parts if key in d]
        errors: dict[str, int] = {}
        for f in figs:
            for k, v in f.errors.items():
                errors[k] = errors.get(k, 0) + v
        out[key] = OpFigures(sum(f.ops for f in figs), sum(f.bytes for f in figs), sum(f.items for f in figs), errors,
                             hdr.merge(f.latency for f in figs if f.latency) or "",
                             hdr.merge(f.service for f in figs if f.service) or "")
    return out


def combine(results: list[tuple[str, PhaseResult]], *, kind: str = "host") -> PhaseResult:
    """Combine per-host PhaseResults of one phase into one (module docstring: sums,
    merged latencies, concatenated per-client figures, union wall window or sum of
    single-stream throughputs). ``results`` is ``[(host name, result), ...]`` of one
    workload; ``kind`` names the sources in the notes (``"host"``: client hosts,
    ``"process"``: client processes of one machine, runner.multihost.processes).
    HDR latency histograms (sustained workloads, runner.load.hdr) are added: the
    merged histogram holds every operation of every source, so its percentiles are those
    of the whole phase (not an average of the sources' percentiles).
    Raises ValueError for an empty list, mixed workloads, a histogram some sources lack
    or one that does not decode."""
    # the per-host figures, as one host's result reports them
    from runner.load.result import client_runqueue_share, client_saturation, client_utilization

    if not results:
        raise ValueError("combine: no results")
    wl = {r.workload for _, r in results}
    if len(wl) != 1:
        raise ValueError(f"combine: mixed workloads {sorted(wl)}")
    workload = wl.pop()
    errors: dict[str, int] = {}
    for _, r in results:
        for k, v in r.errors.items():
            errors[k] = errors.get(k, 0) + v
    total_bytes = sum(r.bytes for _, r in results)
    starts = [r.started_at for _, r in results if r.started_at is not None]
    ends = [r.ended_at for _, r in results if r.ended_at is not None]
    tag, kinds = f"multi-{kind}", kind + ("es" if kind.endswith("s") else "s")
    notes = [f"{tag}: load from {len(results)} client {kinds}: "
             + ", ".join(f"{h} ({r.ops} ops, {r.bytes} bytes)" for h, r in results)]
    if workload in WORKLOADS and WORKLOADS[workload].single_stream:
        rate = sum(r.bytes / r.elapsed_s for _, r in results if r.elapsed_s > 0)
        elapsed = total_bytes / rate if rate > 0 else max(r.elapsed_s for _, r in results)
        notes.append(f"{tag} single-stream: throughput is the sum of the {kinds}' throughputs")
    elif starts and ends:
        elapsed = max(ends) - min(starts)
        notes.append(f"{tag}: elapsed from the earliest start to the latest end over all {kinds}")
    else:
        elapsed = max(r.elapsed_s for _, r in results)
    for h, r in results:
        notes += [f"{h}: {n}" for n in r.notes]
    non_2xx: dict[str, int] = {}
    for _, r in results:
        for k, v in r.non_2xx.items():
            non_2xx[k] = non_2xx.get(k, 0) + v
    pct = results[0][1].latency_percentiles_ms if len(results) == 1 else {}
    if len(results) > 1 and any(r.latency_percentiles_ms for _, r in results):
        notes.append(f"{tag}: the driver's latency percentiles cannot be merged across {kinds}: left out")
    histograms = {}
    for key in sorted({k for _, r in results for k in r.histograms}):
        if not all(key in r.histograms for _, r in results):
            raise ValueError(f"combine: the {key!r} latency histogram is missing from some {kinds}' results")
        merged = hdr.merge(r.histograms[key] for _, r in results)
        if merged is not None:
            histograms[key] = merged
    if histograms and len(results) > 1:
        notes.append(f"{tag}: the {kinds}' HDR latency histograms added (every operation of every {kind})")
    return PhaseResult(
        workload=workload, elapsed_s=max(elapsed, 0.0), bytes=total_bytes, ops=sum(r.ops for _, r in results),
        latencies_ms=[x for _, r in results for x in r.latencies_ms], errors=errors,
        clients=[c for _, r in results for c in r.clients],
        client_cpu_user_s=sum(r.client_cpu_user_s for _, r in results),
        client_cpu_system_s=sum(r.client_cpu_system_s for _, r in results),
        client_runqueue_wait_s=(None if any(r.client_runqueue_wait_s is None for _, r in results)
                                else sum(r.client_runqueue_wait_s or 0.0 for _, r in results)),
        client_steal_share=(None if any(r.client_steal_share is None for _, r in results)
                            else max(r.client_steal_share or 0.0 for _, r in results)),
        cpu_pressure_s=(None if any(r.cpu_pressure_s is None for _, r in results)
                        else max(r.cpu_pressure_s or 0.0 for _, r in results)),
        busiest_client_runqueue_share=(max((x for _, r in results if (x := client_runqueue_share(r)) is not None),
                                           default=None) if len(results) > 1 else None),
        busiest_client_saturation=max(client_saturation(r) for _, r in results) if len(results) > 1 else None,
        notes=notes,
        started_at=min(starts) if starts else None, ended_at=max(ends) if ends else None,
        greeted_sessions=sum(r.greeted_sessions for _, r in results),
        late_sessions=sum(r.late_sessions for _, r in results),
        busiest_client_utilization=max(client_utilization(r) for _, r in results) if len(results) > 1 else None,
        requests=sum(r.requests for _, r in results), successful=sum(r.successful for _, r in results),
        network_failed=sum(r.network_failed for _, r in results), non_2xx=non_2xx,
        bytes_read=sum(r.bytes_read for _, r in results), bytes_written=sum(r.bytes_written for _, r in results),
        latency_percentiles_ms=pct, reconnects=sum(r.reconnects for _, r in results),
        driver_max_rss=max(r.driver_max_rss for _, r in results),
        tls_handshake_ms=[x for _, r in results for x in r.tls_handshake_ms],
        tls=next((r.tls for _, r in results if r.tls), {}),
        unfinished=(None if any(r.unfinished is None for _, r in results)
                    else sum(r.unfinished or 0 for _, r in results)),
        histograms=histograms, user_rate=max(r.user_rate for _, r in results),
        op_figures=_merge_figures([r.op_figures for _, r in results]),
        buckets=_merge_figures([r.buckets for _, r in results]),
        sessions=[x for _, r in results for x in r.sessions], seed=results[0][1].seed,
        deleted=[x for _, r in results for x in r.deleted])


def contribution_samples(docs: list[dict[str, Any]], results: list[tuple[str, PhaseResult]]) -> list[Sample]:
    """One ``client_host`` sample per client host: value = that host's completed
    operations (count), ``raw`` = its own figures (bytes, ops, elapsed_s,
    throughput_mib_s, latency p50/p99 ms, errors, clients, client CPU s, started_at,
    ended_at, late_s: how late after the common start time it began)."""
    from runner.load.result import latency_stats
    from runner.store.models import Sample

    out = []
    late = {d.get("name") or d.get("host"): d.get("late_s") for d in docs}
    for h, r in results:
        lat = latency_stats(r.latencies_ms)
        raw = {"host": h, "bytes": r.bytes, "ops": r.ops, "elapsed_s": r.elapsed_s,
               "throughput_mib_s": r.throughput_mib_s, "latency_p50_ms": lat.get("p50"),
               "latency_p99_ms": lat.get("p99"), "errors": r.errors, "clients": len(r.clients),
               "client_cpu_s": r.client_cpu_user_s + r.client_cpu_system_s,
               "started_at": r.started_at, "ended_at": r.ended_at, "late_s": late.get(h)}
        out.append(Sample(metric="client_host", stat=h[:20], value=float(r.ops), unit="count", raw=raw))
    return out

