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
        tcp: the kernel TCP counters and listen backlog of every done or failed cell
            that stored a non-zero counter or a backlog, in cell order (:class:`CellTcp`).
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
    tcp: list[CellTcp] = field(default_factory=list)
