"""What one load phase measured: the contract between a driver (runner.load.registry) and the rest.

A *phase* is one run of one workload (one cell repeat). A driver fills a
:class:`PhaseResult`; the orchestrator adds server-side metrics (memory, server CPU)
and stores every figure as a sample row.

Units follow docs/methodology.md: bytes, seconds, milliseconds for latencies,
MiB/s (2**20 bytes per second) for throughput.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from runner.metrics.runqueue import CLIENT_BOUND, saturation

MIB = 1 << 20
#: A session whose connect + greeting took longer than this (s) is counted as *late*:
#: the first SYN or SYN-ACK retransmission of Linux fires after 1 s (initial RTO,
#: RFC 6298 as Linux applies it) and the second 2 s later, so a wait past 3 s means the
#: kernel retransmitted its handshake at least twice (an accept queue that overflowed;
#: the cell's TCP counters say how many times).
LATE_SESSION_S = 3.0


@dataclass
class ClientFigures:
    """One client session's share of a phase.

    Attributes:
        bytes: payload bytes this client transferred and the server confirmed.
        seconds: wall time from this client's first operation to its last completion (s).
        ok: True when every operation of this client succeeded.
        requests: HTTP requests this client completed with a 2xx response (0 for FTP);
            the fairness figures of HTTP phases are computed over these counts.
        max_rss: for a client that is a process of its own (the real-client drivers lftp,
            wget, curl: runner.load.tools.spawn), its peak resident set from wait4's
            ``ru_maxrss`` (bytes); 0 when the client is not a process (a session of the
            asyncio client).
        minor_faults / major_faults: that process's page faults (``ru_minflt`` /
            ``ru_majflt``, count); 0 when not a process.
    """

    bytes: int
    seconds: float
    ok: bool = True
    requests: int = 0
    max_rss: int = 0
    minor_faults: int = 0
    major_faults: int = 0


@dataclass
class OpFigures:
    """One operation kind's (or one size bucket's) share of a mixed phase (runner.load.ftp.mixed).

    Attributes:
        ops: completed operations (count).
        bytes: payload bytes they moved (RETR/STOR/resume: the file bytes; LIST/MLSD: the
            listing's bytes; others 0).
        items: LIST/MLSD: names counted in their listings (count); 0 for the others.
        errors: failed operations by kind (runner.load.ftp.replies).
        latency: HDR histogram (runner.load.hdr, encoded) of each completed operation from
            its intended start to its end.
        service: the same from its actual start.
    """

    ops: int = 0
    bytes: int = 0
    items: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latency: str = ""
    service: str = ""


@dataclass
class SessionFigures:
    """One session of a mixed phase: from its login's intended start to its last
    operation's end (``seconds``), its payload ``bytes``, its completed ``ops`` (login
    included) and whether all of them succeeded (``ok``)."""

    seconds: float
    bytes: int
    ops: int
    ok: bool = True


@dataclass
class PhaseResult:
    """Figures of one workload phase, measured by the load generator.

    Attributes:
        workload: workload name (e.g. ``"retr"``, ``"login"``; see runner.catalogue.workloads).
        elapsed_s: wall time of the measured phase (s). For transfer workloads the
            transfer phase only (first command to last ``226``), not login or setup.
        bytes: payload bytes confirmed transferred (sum over clients). A short
            transfer is counted as an error, and its bytes are not included.
        ops: completed operations (sessions, transfers, QUITs).
        latencies_ms: per-operation latencies (ms), one per completed operation.
        errors: failed operations by kind: ``refused``, ``timeout``, ``reply_425``
            (data connection could not be opened, e.g. passive ports exhausted),
            ``reply_4xx`` (other 4xx), ``reply_5xx``, ``short_transfer``, ``protocol``,
            ``reset``.
        clients: per-client figures (for fairness); empty for single-session phases
            that have no meaningful per-client split.
        client_cpu_user_s / client_cpu_system_s: CPU time the load generator process
            spent during the measured phase (s), from ``os.times()`` deltas.
        client_runqueue_wait_s: seconds the load generator's threads were runnable but
            waiting for a CPU during the measured phase (schedstat run delay,
            runner.metrics.runqueue); None when not measured (the real-client and HTTP-tool
            drivers, a kernel without schedstat, a result stored before it was measured).
        client_steal_share: the share of the load generator's CPUs' time (those it may run
            on) the hypervisor stole over the measured phase (``/proc/stat`` steal,
            runner.metrics.runqueue.cpu_steal_s), 0.0-1.0; None when not measured (as
            ``client_runqueue_wait_s``). For a combined result, the highest of the hosts'.
        cpu_pressure_s: seconds of the measured phase in which at least one runnable task
            of the load generator's machine waited for a CPU (Linux PSI ``some``,
            runner.metrics.runqueue.cpu_pressure_us): the machine was short of CPUs, for
            whatever work; None when not measured (drivers other than xferlab-ftp, a kernel
            without PSI). For a combined result, the highest of the hosts' figures.
        notes: free-form remarks (e.g. "login mode: sequential").
        started_at / ended_at: wall clock (``time.time()``, epoch seconds) of the measured
            phase's first start and last end, None when nothing was measured; used to
            combine phases run on several client hosts (runner.multihost).
        greeted_sessions: sessions of the phase (setup included) that got their greeting.
        busiest_client_utilization: for a result combined from several load hosts
            (runner.multihost.combine), the highest of the hosts' own CPU s / wall s;
            None for one host. The client-bound flag is per host: two hosts at 50%
            each are not client-bound (runner.load.result.client_utilization).
        busiest_client_runqueue_share / busiest_client_saturation: for a combined result,
            the highest of the hosts' run-queue wait shares, and the highest of their
            CPU share + run-queue share (:func:`client_saturation`); None for one host.
        late_sessions: of those, how many waited more than :data:`LATE_SESSION_S`
            (3 s) for connect + greeting: the kernel retransmitted their handshake
            (docs/methodology.md, "Slow is a figure").

    FTPS phases (a target with ``tls``, runner.load.ftp.tls) also fill:

    Attributes:
        tls_handshake_ms: each session's TLS handshake on the control connection (ms,
            ClientHello sent to Finished received; the ``AUTH TLS`` round trip before it
            excluded), one per session that completed it, setup sessions included.
        tls: ``{"mode": "explicit", "key_type": "ecdsa-p256", "protocol": "TLSv1.3",
            "cipher": "TLS_AES_256_GCM_SHA384", "bits": "256"}`` of the phase's first TLS
            session; {} for plain FTP.

    HTTP phases (workloads of protocol ``http``; gobench's counters, seed 002) also fill:

    Attributes:
        requests: requests that ended in the phase: ``successful + sum(non_2xx) +
            network_failed`` (the drivers keep this identity).
        successful: requests answered with a 2xx status (``ops`` is the same count).
        network_failed: requests that got no complete response: connect refused, reset,
            timeout, unparsable response (kinds in ``errors`` for xferlab-http).
        non_2xx: requests answered with another status, by status (``{"413": 7}``; a
            driver that cannot tell the status apart uses the key ``"other"``).
        bytes_read / bytes_written: bytes received from / sent to the server on the
            wire, headers included (gobench's read and write throughput). ``bytes``
            holds the payload only: upload bodies of successful requests, or response
            bodies of successful downloads.
        latency_percentiles_ms: ``{"p50": ms, "p90": ..., "p95": ..., "p99": ...,
            "max": ...}`` as reported by a driver that gives no per-request latencies
            (wrk, h2load); empty when ``latencies_ms`` holds them.
        reconnects: connections a client had to open again after the server closed
            one (keep-alive) or after a failed request.
        driver_max_rss: peak resident set of a driver's child process (bytes, its own
            ``VmHWM``), 0 for the in-process driver.
        unfinished: requests in flight when the phase ended, counted nowhere (they may
            still have reached the server: an upload among them may be stored). 0 for
            xferlab-http unless a request outlived ``op_timeout`` past the end; h2load:
            started - done; None when the driver cannot tell (wrk: at most one per
            connection, i.e. ``clients``).

    Sustained-load phases (``retr_sustained``, ``stor_sustained``: runner.load.ftp.sustained) also fill:

    Attributes:
        histograms: HDR latency histograms, encoded (runner.load.hdr: microseconds, 3
            significant digits): ``"latency"``, each completed operation from its
            *intended* start (open loop: its slot in the schedule; closed loop: its actual
            start) to its end, the coordinated-omission-corrected figure; ``"service"``,
            from its actual start to its end. ``latencies_ms`` stays empty for them.
        user_rate: the rate R of the figure "users at rate R" (bytes/s; the workload's
            ``user_rate``), 0 for other workloads.

    Mixed phases (``mixed``: runner.load.ftp.mixed) also fill ``histograms`` (over all
    operations) and:

    Attributes:
        op_figures: ``{op kind: OpFigures}`` (runner.catalogue.mixed.OPS and ``login``); their
            ``ops`` and ``bytes`` sum to ``ops`` and ``bytes`` exactly.
        buckets: ``{size bucket: OpFigures}`` of the transfers (RETR, STOR, resume); their
            ``ops`` and ``bytes`` sum to those of the three kinds exactly.
        sessions: one SessionFigures per session, in the order they ended.
        seed: the phase's seed (WorkloadParams.seed); None for other workloads.
        deleted: the first 1,000 names the phase's DELEs removed (for checks).
    """

    workload: str
    elapsed_s: float
    bytes: int = 0
    ops: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    clients: list[ClientFigures] = field(default_factory=list)
    client_cpu_user_s: float = 0.0
    client_cpu_system_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    started_at: float | None = None
    ended_at: float | None = None
    greeted_sessions: int = 0
    late_sessions: int = 0
    busiest_client_utilization: float | None = None
    client_runqueue_wait_s: float | None = None
    client_steal_share: float | None = None
    cpu_pressure_s: float | None = None
    busiest_client_runqueue_share: float | None = None
    busiest_client_saturation: float | None = None
    requests: int = 0
    successful: int = 0
    network_failed: int = 0
    non_2xx: dict[str, int] = field(default_factory=dict)
    bytes_read: int = 0
    bytes_written: int = 0
    latency_percentiles_ms: dict[str, float] = field(default_factory=dict)
    reconnects: int = 0
    driver_max_rss: int = 0
    unfinished: int | None = 0
    histograms: dict[str, str] = field(default_factory=dict)
    user_rate: int = 0
    tls_handshake_ms: list[float] = field(default_factory=list)
    tls: dict[str, str] = field(default_factory=dict)
    op_figures: dict[str, OpFigures] = field(default_factory=dict)
    buckets: dict[str, OpFigures] = field(default_factory=dict)
    sessions: list[SessionFigures] = field(default_factory=list)
    seed: int | None = None
    deleted: list[str] = field(default_factory=list)

    @property
    def throughput_mib_s(self) -> float:
        """Confirmed payload bytes / elapsed wall time, in MiB/s (0.0 when elapsed is 0)."""
        return self.bytes / MIB / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def ops_rate(self) -> float:
        """Completed operations per second (1/s)."""
        return self.ops / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def error_count(self) -> int:
        """Total failed operations, all kinds."""
        return sum(self.errors.values())


def latency_stats(latencies_ms: list[float], *, p95: bool = False) -> dict[str, float]:
    """p50/p90/p99/max of per-operation latencies (ms), numpy's default linear
    interpolation between closest ranks (Hyndman & Fan type 7); with ``p95`` (HTTP
    phases) also p95. Empty input → {}."""
    if not latencies_ms:
        return {}
    a = np.asarray(latencies_ms, dtype=float)
    qs = [50, 90, 95, 99] if p95 else [50, 90, 99]
    out = {f"p{q}": float(v) for q, v in zip(qs, np.percentile(a, qs))}
    out["max"] = float(a.max())
    return out


def client_utilization(result: PhaseResult) -> float:
    """Load-generator CPU seconds / phase wall seconds (1.0 = one core fully busy), of
    the busiest load host when the result combines several (each host is one
    load-generator process: summing them would flag two hosts at 50% as client-bound)."""
    if result.busiest_client_utilization is not None:
        return result.busiest_client_utilization
    if result.elapsed_s <= 0:
        return 0.0
    return (result.client_cpu_user_s + result.client_cpu_system_s) / result.elapsed_s


def client_runqueue_share(result: PhaseResult) -> float | None:
    """Seconds the load generator waited on a run queue / phase wall seconds (0.5: runnable
    but kept off the CPU for half the phase), of the busiest host when the result combines
    several; None when the driver did not measure it (runner.metrics.runqueue)."""
    if result.busiest_client_runqueue_share is not None:
        return result.busiest_client_runqueue_share
    if result.client_runqueue_wait_s is None or result.elapsed_s <= 0:
        return None
    return result.client_runqueue_wait_s / result.elapsed_s


def cpu_pressure_share(result: PhaseResult) -> float | None:
    """``cpu_pressure_s`` / phase wall seconds, capped at 1 (0.9: the machine had a task
    waiting for a CPU during 90% of the phase); None when not measured."""
    if result.cpu_pressure_s is None or result.elapsed_s <= 0:
        return None
    return min(result.cpu_pressure_s / result.elapsed_s, 1.0)


def client_saturation(result: PhaseResult) -> float:
    """runner.metrics.runqueue.saturation of the phase's :func:`client_utilization`,
    :func:`client_runqueue_share` and ``client_steal_share``: the share of the phase the load
    generator was runnable, running or waiting for a CPU. A client alone on its CPU waits
    little, so this is its utilization; a client pinned to a CPU that another busy process
    also uses runs about half the time and waits the other half, so its utilization alone
    (0.5) hides that it was the bottleneck, and this figure (1.0) shows it. For a combined
    result, the highest of the hosts' figures."""
    if result.busiest_client_saturation is not None:
        return result.busiest_client_saturation
    return saturation(client_utilization(result), client_runqueue_share(result), result.client_steal_share)


def client_bound(result: PhaseResult) -> bool:
    """True when the phase is flagged client-bound: :func:`client_saturation` at or above
    runner.metrics.runqueue.CLIENT_BOUND."""
    return client_saturation(result) >= CLIENT_BOUND
