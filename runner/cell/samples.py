"""Turn what a cell measured into sample rows (metric names and units of docs/methodology.md)."""
from __future__ import annotations

from typing import Any

import numpy as np

from runner.catalogue.workloads import WORKLOADS
from runner.cell.mixed_samples import mixed_samples
from runner.cell.server_cpu import ServerCpu, server_cpu_samples
from runner.load import hdr
from runner.load.result import (
    LATE_SESSION_S,
    PhaseResult,
    client_bound,
    client_runqueue_share,
    client_utilization,
    cpu_pressure_share,
    latency_stats,
)
from runner.metrics.fairness import STATS as FAIRNESS_STATS
from runner.metrics.fairness import figures_from_raw
from runner.store.models import Sample

MAX_RAW_LATENCIES = 200_000


def histogram_samples(result: PhaseResult) -> list[Sample]:
    """Sample rows of a phase whose latencies are HDR histograms (the sustained workloads,
    runner.load.ftp.sustained; runner.load.hdr: microseconds, 3 significant digits):
    ``latency`` (from each operation's intended start: corrected for coordinated omission)
    and ``service_time`` (from its actual start), stats ``p50``, ``p90``, ``p95``, ``p99``,
    ``max`` in ms, the encoded histogram as the ``raw`` of ``p50`` (``{"hdr": text, "unit":
    "us", "digits": 3}``); and, with a ``user_rate``, ``users_at_rate`` (count of clients
    whose bytes / span reached it; ``raw``: ``{"rate": bytes/s, "clients": n}``).
    Returns unsaved Sample objects."""
    out = []
    for key, metric in (("latency", "latency"), ("service", "service_time")):
        text = result.histograms.get(key)
        if not text:
            continue
        raw = {"hdr": text, "unit": "us", "digits": hdr.SIGNIFICANT_DIGITS}
        out += [Sample(metric=metric, stat=k, value=v, unit="ms", raw=raw if k == "p50" else None)
                for k, v in hdr.percentiles_ms(text).items()]
    if result.user_rate > 0 and result.clients:
        rate = float(result.user_rate)
        n = sum(1 for c in result.clients if c.seconds > 0 and c.bytes / c.seconds >= rate)
        out.append(Sample(metric="users_at_rate", stat="value", value=float(n), unit="count",
                          raw={"rate": result.user_rate, "clients": len(result.clients)}))
    return out


def http_samples(result: PhaseResult) -> list[Sample]:
    """Sample rows of gobench's counters for one HTTP phase (seed 002; units as
    docs/methodology.md): ``requests_rate`` (successful requests per second, ``req/s``,
    the primary figure), ``http_requests`` (count; stats ``total``, ``successful``,
    ``network_failed``, ``non_2xx``), ``http_status`` (count of each non-2xx status, stat =
    the status), ``read_throughput`` / ``write_throughput`` (wire bytes received / sent,
    headers included, MiB/s), ``reconnects`` (count) and, for a driver run as a child
    process, ``client_max_rss`` (bytes). Returns unsaved Sample objects."""
    el = result.elapsed_s
    rate = result.successful / el if el > 0 else 0.0
    out = [Sample(metric="requests_rate", stat="value", value=rate, unit="req/s")]
    for stat, n in (("total", result.requests), ("successful", result.successful),
                    ("network_failed", result.network_failed), ("non_2xx", sum(result.non_2xx.values()))):
        out.append(Sample(metric="http_requests", stat=stat, value=float(n), unit="count"))
    for status, n in sorted(result.non_2xx.items()):
        out.append(Sample(metric="http_status", stat=status[:20], value=float(n), unit="count"))
    for metric, n in (("read_throughput", result.bytes_read), ("write_throughput", result.bytes_written)):
        out.append(Sample(metric=metric, stat="value", value=n / (1 << 20) / el if el > 0 else 0.0, unit="MiB/s"))
    out.append(Sample(metric="reconnects", stat="value", value=float(result.reconnects), unit="count"))
    if result.driver_max_rss:
        out.append(Sample(metric="client_max_rss", stat="value", value=float(result.driver_max_rss), unit="bytes"))
    return out


def fairness_samples(result: PhaseResult, *, http: bool) -> list[Sample]:
    """Sample rows of metric ``fairness`` for a phase of at least two clients (none
    otherwise), computed by runner.metrics.fairness from the per-client list stored as the
    ``raw`` of stat ``jain``: ``[[bytes, seconds, ok], ...]`` (FTP) or ``[[requests,
    seconds, ok], ...]`` (HTTP). Stats: ``jain`` and ``cv`` (ratio), ``min_rate``,
    ``p50_rate``, ``p95_rate``, ``max_rate`` (MiB/s FTP, req/s HTTP), ``min_time``,
    ``p50_time``, ``p95_time``, ``max_time`` (s); HTTP phases also ``min_requests`` /
    ``max_requests`` (count). Definitions: docs/methodology.md, "Fairness"."""
    if len(result.clients) < 2:
        return []
    raw = [[c.requests if http else c.bytes, round(c.seconds, 6), c.ok] for c in result.clients]
    figs = figures_from_raw(raw, http=http)
    if figs is None:
        return []
    values = figs.as_dict()
    out = [Sample(metric="fairness", stat=stat, value=float(values[stat]),
                  unit=figs.rate_unit if unit == "rate" else unit, raw=raw if stat == "jain" else None)
           for stat, unit in FAIRNESS_STATS]
    if http:
        counts = [float(c.requests) for c in result.clients]
        out.append(Sample(metric="fairness", stat="min_requests", value=min(counts), unit="count"))
        out.append(Sample(metric="fairness", stat="max_requests", value=max(counts), unit="count"))
    return out


def process_samples(result: PhaseResult) -> list[Sample]:
    """Sample rows of a phase whose clients are processes of their own (the real-client
    drivers lftp, wget, curl: ClientFigures with ``max_rss`` > 0), from each process's
    wait4 rusage (seed 003's ``time`` line): ``client_max_rss`` stats ``max`` and
    ``median`` over the processes (bytes; ``raw`` of ``max``: every process's, in client
    order), ``client_page_faults`` stats ``minor`` and ``major`` summed over them (count).
    Nothing for a phase without such clients. Returns unsaved Sample objects."""
    procs = [c for c in result.clients if c.max_rss > 0]
    if not procs:
        return []
    rss = [float(c.max_rss) for c in procs]
    return [Sample(metric="client_max_rss", stat="max", value=max(rss), unit="bytes", raw=[c.max_rss for c in procs]),
            Sample(metric="client_max_rss", stat="median", value=float(np.median(rss)), unit="bytes"),
            Sample(metric="client_page_faults", stat="minor", value=float(sum(c.minor_faults for c in procs)),
                   unit="count"),
            Sample(metric="client_page_faults", stat="major", value=float(sum(c.major_faults for c in procs)),
                   unit="count")]


def tls_samples(result: PhaseResult) -> list[Sample]:
    """FTPS rows of a phase (none for plain FTP): metric ``tls_handshake`` (ms) with stats
    ``p50``, ``p99``, ``max`` over its sessions' control-connection handshakes (numpy's
    linear percentiles, as :func:`latency_stats`) and ``count``; metric ``tls`` stat
    ``version`` (value 1.2 or 1.3, the negotiated protocol) with the mode, key type,
    protocol and cipher in ``raw``."""
    out: list[Sample] = []
    hs = result.tls_handshake_ms
    if hs:
        for stat, v in latency_stats(hs).items():
            if stat in ("p50", "p99", "max"):
                out.append(Sample(metric="tls_handshake", stat=stat, value=v, unit="ms",
                                  raw=[round(x, 3) for x in hs[:MAX_RAW_LATENCIES]] if stat == "p50" else None))
        out.append(Sample(metric="tls_handshake", stat="count", value=float(len(hs)), unit="count"))
    if result.tls:
        proto = result.tls.get("protocol", "")
        version = float(proto.removeprefix("TLSv")) if proto.removeprefix("TLSv").replace(".", "").isdigit() else 0.0
        out.append(Sample(metric="tls", stat="version", value=version, unit="version", raw=dict(result.tls)))
    return out


def phase_samples(result: PhaseResult, *, memory: dict[str, dict[str, float | None]] | None = None,
                  server_cpu: ServerCpu | tuple[float, float] | None = None,
                  memory_timeline: list[Any] | None = None,
                  cgroup_memory: dict[str, float] | None = None) -> list[Sample]:
    """Sample rows for one measured phase.

    Args:
        result: what the load generator measured.
        memory: ``{"uss": {"start": b, "loaded": b, "end": b, "peak": b},
            "rss_minus_shared": {...}}`` in bytes (server process tree, recursive).
        server_cpu: the server's CPU during the phase (runner.cell.server_cpu.ServerCpu:
            its cgroup's counters, or the process tree's), or (user, system) CPU seconds
            of the server tree (a process-tree figure); rows by
            runner.cell.server_cpu.server_cpu_samples, per GiB / per op of its total.
        memory_timeline: ``[(t_s, uss, rss_minus_shared, nprocs), ...]`` stored raw on the peak sample.
        cgroup_memory: the server container's memory cgroup at the end of the phase,
            ``{"current": b, "peak": b, "anon": b}`` in bytes (docker backend), stored as
            metric ``server_cgroup_mem``.
    Returns: unsaved Sample objects (cell_id unset).
    """
    info = WORKLOADS.get(result.workload)
    out: list[Sample] = [Sample(metric="elapsed", stat="value", value=result.elapsed_s, unit="s")]
    if result.bytes or (info and info.primary == "throughput"):
        out.append(Sample(metric="throughput", stat="value", value=result.throughput_mib_s, unit="MiB/s"))
    out.append(Sample(metric="bytes", stat="value", value=float(result.bytes), unit="bytes"))
    out.append(Sample(metric="ops_rate", stat="value", value=result.ops_rate, unit="1/s"))
    http = info is not None and info.protocol == "http"
    if result.histograms:
        out += histogram_samples(result)
    else:
        lat = latency_stats(result.latencies_ms, p95=http) or dict(result.latency_percentiles_ms)
        raw_lat = [round(x, 3) for x in result.latencies_ms[:MAX_RAW_LATENCIES]]
        for k, v in lat.items():
            out.append(Sample(metric="latency", stat=k, value=v, unit="ms", raw=raw_lat if k == "p50" else None))
    out.append(Sample(metric="errors", stat="total", value=float(result.error_count), unit="count",
                      raw=dict(result.errors) or None))
    for kind, n in sorted(result.errors.items()):
        out.append(Sample(metric="errors", stat=kind[:20], value=float(n), unit="count"))
    if http:
        out += http_samples(result)
    if http or not (info and info.single_stream):  # single-stream FTP: one process per transfer, no sharing
        out += fairness_samples(result, http=http)
    out += process_samples(result)
    if result.greeted_sessions:
        out.append(Sample(metric="late_sessions", stat="value", value=float(result.late_sessions), unit="count",
                          raw={"greeted": result.greeted_sessions, "threshold_s": LATE_SESSION_S}))
    out += tls_samples(result)
    out += mixed_samples(result)
    out.append(Sample(metric="client_cpu", stat="user", value=result.client_cpu_user_s, unit="s"))
    out.append(Sample(metric="client_cpu", stat="system", value=result.client_cpu_system_s, unit="s"))
    out.append(Sample(metric="client_cpu", stat="utilization", value=client_utilization(result), unit="ratio"))
    if (rq := client_runqueue_share(result)) is not None:
        out.append(Sample(metric="client_cpu", stat="runqueue_wait", value=rq, unit="ratio",
                          raw=({"wait_s": round(result.client_runqueue_wait_s, 6)}
                               if result.client_runqueue_wait_s is not None else None)))
    if result.client_steal_share is not None:
        out.append(Sample(metric="client_cpu", stat="steal", value=result.client_steal_share, unit="ratio"))
    if (psi := cpu_pressure_share(result)) is not None:
        out.append(Sample(metric="machine_cpu", stat="pressure", value=psi, unit="ratio",
                          raw={"some_s": round(result.cpu_pressure_s or 0.0, 6)}))
    if server_cpu is not None:
        cpu = server_cpu if isinstance(server_cpu, ServerCpu) else ServerCpu("tree", *server_cpu)
        out += server_cpu_samples(cpu)
        out += efficiency_samples("server_cpu", cpu.total_s, result)
    out += efficiency_samples("client_cpu", result.client_cpu_user_s + result.client_cpu_system_s, result)
    for kind, metric in (("uss", "server_mem_uss"), ("rss_minus_shared", "server_mem_rss_minus_shared")):
        for stat, mem in (memory or {}).get(kind, {}).items():
            if mem is None:
                continue
            timeline = memory_timeline if (stat == "peak" and kind == "uss" and memory_timeline) else None
            out.append(Sample(metric=metric, stat=stat, value=float(mem), unit="bytes", raw=timeline))
    for stat, v in (cgroup_memory or {}).items():
        if v is not None:
            out.append(Sample(metric="server_cgroup_mem", stat=stat, value=float(v), unit="bytes"))
    return out


def headline(result: PhaseResult) -> str:
    """One-line human summary of a phase, e.g. ``1652.7 MiB/s`` or ``0.19 s, 300 ops, 0 errors``."""
    info = WORKLOADS.get(result.workload)
    if info and info.protocol == "http":
        rate = result.successful / result.elapsed_s if result.elapsed_s > 0 else 0.0
        s = (f"{rate:,.0f} req/s, {result.requests} requests, {result.network_failed} network failed, "
             f"{sum(result.non_2xx.values())} non-2xx")
        return s + (" [client-bound]" if client_bound(result) else "")
    if info and info.primary == "throughput":
        s = f"{result.throughput_mib_s:,.1f} MiB/s"
    else:
        s = f"{result.elapsed_s:.3f} s"
    s += f", {result.ops} ops"
    if result.histograms.get("latency"):  # sustained: the rate and the corrected p99
        p99 = hdr.percentiles_ms(result.histograms["latency"]).get("p99")
        s += f" ({result.ops_rate:,.1f}/s" + (f", p99 {p99:.3g} ms)" if p99 is not None else ")")
    if result.error_count:
        s += ", errors: " + ", ".join(f"{k}={v}" for k, v in sorted(result.errors.items()))
    if result.late_sessions:
        s += f", {result.late_sessions} of {result.greeted_sessions} sessions waited > {LATE_SESSION_S:g} s"
    if client_bound(result):
        s += " [client-bound]"
    return s


def tcp_samples(delta: dict[str, int], backlogs: list[tuple[str, int]] | None, netns: str = "") -> list[Sample]:
    """Sample rows of the kernel TCP counters of one phase (runner.metrics.tcpstats).

    Args:
        delta: ``{counter name: count during the phase}`` (counters_delta), stored one
            row each as metric ``tcp``, stat = the kernel's counter name, unit ``count``;
            the first row's ``raw`` names the network namespace read.
        backlogs: the server's listening sockets as ``[(local address, backlog), ...]``,
            stored as metric ``listen_backlog`` (value: the smallest backlog, the one a
            burst of connects overflows first; ``raw``: every socket). None: not read.
        netns: the namespace's identity (``net:[4026531840]``).
    Returns: unsaved Sample objects."""
    out = [Sample(metric="tcp", stat=name[:20], value=float(n), unit="count",
                  raw={"netns": netns} if i == 0 and netns else None)
           for i, (name, n) in enumerate(delta.items())]
    if backlogs:
        out.append(Sample(metric="listen_backlog", stat="value", value=float(min(b for _, b in backlogs)),
                          unit="count", raw=[list(b) for b in backlogs]))
    return out


def link_samples(counters: dict[str, int], link: str, readings: dict[str, Any]) -> list[Sample]:
    """Sample rows of a shaped link's qdiscs over one phase (runner.net.link).

    Args:
        counters: ``{SIDE_sent_bytes, SIDE_packets, SIDE_drops, SIDE_overlimits}`` for
            SIDE ``client`` and ``server`` (linknet.phase_counters: the egress of that
            end, so ``server_sent_bytes`` is what a RETR sent), one row each as metric
            ``link_qdisc``, unit ``bytes`` or ``count``.
        link: the link's text (``100mbit``).
        readings: ``{"before": ..., "after": ...}``, each LinkNet.qdiscs() (every qdisc
            of both ends with its options and counters): the first row's ``raw``, with
            ``link``.
    Returns: unsaved Sample objects."""
    return [Sample(metric="link_qdisc", stat=name, value=float(n), unit="bytes" if name.endswith("bytes") else "count",
                   raw={"link": link, **readings} if i == 0 else None)
            for i, (name, n) in enumerate(counters.items())]


GIB = 1 << 30


def efficiency_samples(who: str, cpu_s: float, result: PhaseResult) -> list[Sample]:
    """CPU cost per unit of work of one phase, valid even when the other side is the
    bottleneck (a client-bound cell still compares servers by what each spent).

    ``who`` is ``server_cpu`` or ``client_cpu``; ``cpu_s`` the user + system CPU seconds
    of that side over the measured phase. A phase that moved payload bytes gets
    ``<who>_per_gib`` (CPU s per GiB, 2**30 bytes, unit ``s/GiB``); one that moved none
    but completed operations (logins, QUITs) gets ``<who>_per_op`` (CPU microseconds per
    completed operation, unit ``us/op``). An HTTP phase gets ``<who>_per_op`` per successful
    request. Nothing when the phase completed nothing.
    Returns unsaved Sample objects (stat ``value``)."""
    info = WORKLOADS.get(result.workload)
    if info is not None and info.protocol == "http" and result.successful > 0:  # per request: the HTTP figure
        return [Sample(metric=f"{who}_per_op", stat="value", value=cpu_s * 1e6 / result.successful, unit="us/op")]
    if result.bytes > 0:
        return [Sample(metric=f"{who}_per_gib", stat="value", value=cpu_s / (result.bytes / GIB), unit="s/GiB")]
    if result.ops > 0:
        return [Sample(metric=f"{who}_per_op", stat="value", value=cpu_s * 1e6 / result.ops, unit="us/op")]
    return []

