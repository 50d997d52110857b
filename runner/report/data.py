"""Input of the report layer: raw samples grouped per (server, workload, metric).

The store turns sample rows into these (runner.report.reader.load_campaign); reports never
touch the database nor the workload catalogue: everything a table shows (titles,
units, direction, the metric of each row, row order) is carried here, so every export
can be tested on plain data with exact expected output.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Series:
    """All repeats of one metric of one cell family.

    Attributes:
        server: server label, e.g. ``"pyftpdlib 2.2.0"``.
        workload: workload name, e.g. ``"retr"``.
        title: row title in the seed's wording, e.g. ``"RETR (server -> client)"``
            or ``"300 concurrent clients (connect, login)"``.
        metric: metric name (``throughput``, ``elapsed``, ``server_mem_rss_minus_shared``...).
        unit: ``MiB/s``, ``s``, ``bytes``, ``ms``, ...
        higher_is_better: True for throughput/ops_rate, False for elapsed/latency/memory.
        samples: one value per repeat (raw, unrounded).
        params_key: canonical string of the workload parameters (same cell family).
    """

    server: str
    workload: str
    title: str
    metric: str
    unit: str
    higher_is_better: bool
    samples: tuple[float, ...]
    params_key: str = ""
    checkpoint: str | None = None  # for memory series: "start", "end", "peak"


@dataclass(frozen=True)
class WorkloadFacts:
    """What the report layer knows of one workload (filled from the workload catalogue
    when a campaign is read from the store).

    Attributes:
        title: row title for rows that have no series (every cell of the workload
            failed), e.g. ``"300 concurrent clients (STOR 10M file)"``.
        primary: the metric a workload's row shows (``throughput``, ``elapsed``, ...).
        unit: unit of ``primary``.
        higher_is_better: direction of ``primary``.
        sustained: a sustained-load workload (a steady-state throughput): its cells of
            several client counts make a saturation curve (runner.report.saturation).
    """

    title: str
    primary: str
    unit: str
    higher_is_better: bool
    sustained: bool = False


@dataclass(frozen=True)
class MixedRow:
    """One operation kind or size bucket of a ``mixed`` workload's cells, over their done
    repeats (runner.cell.mixed_samples; docs/methodology.md, "Mixed sessions").

    Attributes:
        server / workload / title / params_key: the cell family.
        group: ``op`` (an operation kind) or ``bucket`` (a size bucket of the transfers).
        name: the operation (``retr``, ``login``...) or the bucket (``4K``, ``64K-128K``).
        repeats: done cells that stored it.
        ops: completed operations per cell (count; median over the repeats).
        ops_rate: operations per second of the phase (1/s; median).
        mib_s: payload MiB per second of the phase (2**20 bytes/s; median).
        p50 / p99 / p999: latency from the intended start (ms; median over the repeats of
            each cell's percentile); None when not stored (p99.9 of a bucket).
        errors: failed operations, summed over the repeats (count).
        service_p99: p99 of the service time, from the actual start (ms; median); None for a
            bucket. Far below ``p99``: the operations started late (a busy client), not slow.
    """

    server: str
    workload: str
    title: str
    params_key: str
    group: str
    name: str
    repeats: int
    ops: float
    ops_rate: float
    mib_s: float
    p50: float | None
    p99: float | None
    p999: float | None
    errors: int
    service_p99: float | None = None


@dataclass(frozen=True)
class CellTcp:
    """The kernel TCP counters and listen backlog stored for one cell (runner.metrics.tcpstats,
    metrics ``tcp`` and ``listen_backlog`` of runner.cell.samples.tcp_samples).

    Attributes:
        server: server label.
        workload: workload name.
        title: row title of the cell's workload and parameters.
        params_key: canonical parameter string (its cell family).
        repeat: the cell's repeat index, as stored (0 = first).
        status: ``done`` or ``failed``.
        counters: kernel counter name (``ListenOverflows``...) -> count during the phase,
            the non-zero ones only, counted in the server's network namespace.
        listen_backlog: the smallest backlog of the server's listening sockets, None
            when it was not read.
    """

    server: str
    workload: str
    title: str
    params_key: str
    repeat: int
    status: str
    counters: dict[str, int] = field(default_factory=dict)
    listen_backlog: int | None = None


@dataclass(frozen=True)
class CellProfileData:
    """The server's CPU profile stored for one cell (table ``cell_profile``; the profile a
    cell runner measured over the phase, runner.metrics.profile_data.ServerProfile).

    Attributes:
        cell_id: the cell's database id (``xferlab profile CELL_ID``).
        server: server label.
        workload: workload name.
        title: row title of the cell's workload and parameters.
        params_key: canonical parameter string.
        repeat: the cell's repeat index, as stored (0 = first).
        status: ``done`` or ``failed``.
        profiler: ``perf`` or ``py-spy``.
        profiler_version: the profiler's own version string.
        rate_hz: sampling frequency, samples per second per CPU.
        duration_s: seconds the profiler ran.
        on_cpu: folded stacks of the on-CPU samples (``frame;frame;... N``, N samples).
        off_cpu: folded stacks of off-CPU time (N in microseconds), None when not measured.
        on_cpu_s: CPU seconds the samples stand for.
        off_cpu_s: seconds the server's threads were blocked, None when not measured.
        syscalls: ``{"name", "count", "total_s", "errors"}`` per system call, as stored.
        notes: what the profile could not see, one line each.
    """

    cell_id: int
    server: str
    workload: str
    title: str
    params_key: str
    repeat: int
    status: str
    profiler: str
    profiler_version: str
    rate_hz: int
    duration_s: float
    on_cpu: str
    off_cpu: str | None = None
    on_cpu_s: float = 0.0
    off_cpu_s: float | None = None
    syscalls: tuple[dict, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class MemoryTimeline:
    """The server's memory over one cell, as the sampler saw it (the HTML report's "memory
    over time" chart).

    Attributes:
        server: server label.
        workload: workload name.
        params_key: canonical string of the workload parameters.
        title: row title of the workload, as :attr:`Series.title`.
        repeat: the repeat the timeline is of (0-based; the first ``done`` cell's).
        points: ``(t_s, uss_bytes)`` pairs: seconds since the server started, the server
            tree's USS (unique set size) in bytes; in time order.
    """

    server: str
    workload: str
    params_key: str
    title: str
    repeat: int
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class ClientCurve:
    """The per-client rates of one N-client cell, sorted from the fastest client to the
    slowest (runner.metrics.fairness.sorted_curve): the HTML report's fairness chart.

    Attributes:
        server: server label.
        workload: workload name.
        params_key: canonical string of the workload parameters.
        title: row title of the workload, as :attr:`Series.title`.
        repeat: 0-based repeat of the cell.
        unit: ``"MiB/s"`` (FTP) or ``"req/s"`` (HTTP).
        jain: Jain's index over every client of the cell (1 = all got the same rate).
        clients: number of clients of the cell.
        points: ``(rank, rate)`` pairs, rank 1 = the fastest client; at most a few hundred
            (thinned evenly, the first and the last kept).
    """

    server: str
    workload: str
    params_key: str
    title: str
    repeat: int
    unit: str
    jain: float
    clients: int
    points: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class CapacityResult:
    """The result of one capacity search (docs/methodology.md, "Capacity"), as the cell that
    ended it stored it (sample ``capacity``/``users``, runner.metrics.capacity.summary).

    Attributes:
        server: server label.
        workload: workload name.
        title: row title of the search's last step.
        params_key: the steps' parameter key without ``clients`` and ``rate``.
        users: sustainable users at the service level (0: not even one).
        record: the stored summary: ``slo``, ``slo_text``, ``users``, ``lo``, ``hi``,
            ``capped``, ``reason``, ``reason_text`` and ``steps`` (each step's figures, ``ok``
            and ``missed``, in run order).
    """

    server: str
    workload: str
    title: str
    params_key: str
    users: int
    record: dict


@dataclass
class CampaignData:
    """Everything a campaign report needs.

    Attributes:
        campaign_id: database id.
        name: campaign name.
        servers: server labels in spec order.
        series: all series of the campaign.
        environment: environment snapshot summary (kernel, cpu, cores, ...).
        failures: (server, workload, repeat, error message) of failed or skipped cells.
        workloads: workload name -> its :class:`WorkloadFacts`, in row order (the
            catalogue's order). Rows of workloads not listed come after, by first
            appearance; their row metric is the first non-memory metric seen. Not part of
            the JSON document (version 1) and not compared by ``==``.
        setups: server label -> how it ran (the build info of its first measured cell:
            ``version``, ``backend``, ``obtained``, ``config_hash``, ``variant``,
            ``storage``, ``storage_fs``, ``network``...); the reports' "Setup" table.
        environments: for a comparison across two campaigns, server label -> the
            environment snapshot of its campaign (the reports list the differences);
            empty otherwise.
        cpu_sources: (server, workload, params_key) -> where the server CPU figures of
            its done cells came from, one entry per cell that has them, in cell order:
            ``cgroup`` (the server's cgroup counters over the measured span),
            ``cgroup:phase`` (over the whole phase) or ``tree`` (the process-tree sum;
            docs/methodology.md, "What server CPU counts"). Not part of the JSON document.
        timelines: the memory timeline of each (server, workload, parameters): its first
            ``done`` cell's (:class:`MemoryTimeline`); not part of the JSON document and not
            compared by ``==``.
        client_curves: the per-client rates of every ``done`` N-client cell
            (:class:`ClientCurve`), in cell order; not part of the JSON document and not
            compared by ``==``.
        tcp: the kernel TCP counters and listen backlog of every done or failed cell
            that stored a non-zero counter or a backlog, in cell order (:class:`CellTcp`).
        profiles: the server CPU profile of every done or failed cell that has one, in
            cell order (:class:`CellProfileData`).
        mixed: the per-operation and per-bucket figures of the ``mixed`` cells
            (:class:`MixedRow`), operations in table order then buckets by size.
        capacity: the capacity searches that ended (:class:`CapacityResult`), in cell order.
    """

    campaign_id: int
    name: str
    servers: list[str]
    series: list[Series]
    environment: dict = field(default_factory=dict)
    failures: list[tuple[str, str, int, str]] = field(default_factory=list)
    workloads: dict[str, WorkloadFacts] = field(default_factory=dict, compare=False)
    setups: dict[str, dict] = field(default_factory=dict, compare=False)
    environments: dict[str, dict] = field(default_factory=dict, compare=False)
    cpu_sources: dict[tuple[str, str, str], tuple[str, ...]] = field(default_factory=dict, compare=False)
    timelines: list[MemoryTimeline] = field(default_factory=list, compare=False)
    client_curves: list[ClientCurve] = field(default_factory=list, compare=False)
    tcp: list[CellTcp] = field(default_factory=list)
    profiles: list[CellProfileData] = field(default_factory=list)
    mixed: list[MixedRow] = field(default_factory=list)
    capacity: list[CapacityResult] = field(default_factory=list)
