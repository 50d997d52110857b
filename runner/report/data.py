"""Input of the report layer: raw samples grouped per (server, workload, metric).

The store turns sample rows into these; reports never touch the database, so
every export can be tested on plain data with exact expected output.
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
    """

    campaign_id: int
    name: str
    servers: list[str]
    series: list[Series]
    environment: dict = field(default_factory=dict)
    failures: list[tuple[str, str, int, str]] = field(default_factory=list)
