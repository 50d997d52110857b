"""SQLAlchemy 2.0 models of the results store.

Schema changes go through Alembic only (``migrations/``); these classes are the
source the migrations were written from. Every sample is one row, so any statistic
can be recomputed from raw data.

Tables:
    campaign      one benchmark campaign (a validated spec, its status and progress)
    cell          server x variant x workload x params x repeat; the unit of work and of failure
    sample        one measured figure of one cell (metric, stat, value, unit, raw data)
    server_build  what exactly ran: server name, version, variant, config hash, binary
    environment   environment snapshot (kernel, CPU, sysctls, ulimits, versions, pinning)
    series_point  one point of a history series: a group's raw figures, kept by finish_cell
                  (derived from ``sample``; runner/store/points.py)
    cell_profile  the server's CPU profile over a profiled cell's measured phase (folded
                  stacks, syscall table; runner/store/profiles.py)
    noise_calibration  the noise floor and false-alarm rate of a series, from A/A runs
                  (``xferlab calibrate``; runner/history/calibration.py)
    bisect_job    a bisect queued from the dashboard, its progress, steps and answer
                  (runner/campaign/bisect_job.py)
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Status values (plain strings; checked by the application, listed here once).
CAMPAIGN_STATUSES = ("queued", "running", "done", "failed", "cancelled", "interrupted")
CELL_STATUSES = ("queued", "running", "done", "failed", "skipped", "cancelled")


class Base(DeclarativeBase):
    """Declarative base of all xferlab tables."""


class Campaign(Base):
    """A campaign: the validated spec (JSON), status and progress counters."""

    __tablename__ = "campaign"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    spec: Mapped[dict[str, Any]] = mapped_column(JSONB)
    status: Mapped[str] = mapped_column(String(20), default="queued", index=True)
    backend: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    cells_total: Mapped[int] = mapped_column(Integer, default=0)
    cells_done: Mapped[int] = mapped_column(Integer, default=0)
    cells_failed: Mapped[int] = mapped_column(Integer, default=0)
    cells_skipped: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)
    lab_version: Mapped[str] = mapped_column(String(40))
    #: ``host:pid`` of the foreground ``xferlab run``/``resume`` executing it; NULL when
    #: queued for workers (they claim only campaigns without an owner).
    owner: Mapped[str | None] = mapped_column(String(200))

    cells: Mapped[list[Cell]] = relationship(back_populates="campaign", order_by="Cell.seq")


class ServerBuild(Base):
    """One server build as it ran: name, version, variant options, config hash, details."""

    __tablename__ = "server_build"
    __table_args__ = (UniqueConstraint("name", "version", "variant_key", "config_hash"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(40))
    version: Mapped[str] = mapped_column(String(60), default="")
    variant: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    variant_key: Mapped[str] = mapped_column(String(400), default="")
    config_hash: Mapped[str] = mapped_column(String(64), default="")
    info: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Environment(Base):
    """An environment snapshot, deduplicated by the sha256 of its JSON (``digest``).

    ``env_class`` is a short hash of the fields that make results comparable
    (kernel, CPU model, cores, sysctls, backend): cells of different classes are
    marked, not silently compared.
    """

    __tablename__ = "environment"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    env_class: Mapped[str] = mapped_column(String(16), index=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSONB)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Cell(Base):
    """One unit of work: a (server, variant, workload, params, repeat) to measure.

    ``seq`` orders execution; ``worker`` is ``host:pid`` of the process that claimed it.
    ``server_cpu_source`` says where its ``server_cpu`` rows came from: ``cgroup`` (the
    server's cgroup counters) or ``tree`` (the process-tree sum; every cell stored before
    the cgroup figure existed); NULL when no server CPU was measured.
    ``server_cpu_window`` says what they span: ``span`` (the measured span, read at its
    ends) or ``phase`` (the whole phase, its untimed set-up and teardown included: every
    cell stored before the span figure existed, and drivers that do not mark their span);
    NULL when no server CPU was measured. ``profiled`` marks
    the extra repeat of a profiled cell family (runner.spec.model.expand): it runs under
    the profilers and stays out of the primary figures.
    """

    __tablename__ = "cell"
    __table_args__ = (
        UniqueConstraint("campaign_id", "seq"),
        Index("ix_cell_campaign_status", "campaign_id", "status"),
        Index("ix_cell_series", "server", "workload", "params_key"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    server: Mapped[str] = mapped_column(String(40))
    server_version: Mapped[str] = mapped_column(String(60), default="")
    variant: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    server_label: Mapped[str] = mapped_column(String(200))
    server_spec: Mapped[dict[str, Any]] = mapped_column(JSONB, default=dict)
    workload: Mapped[str] = mapped_column(String(40))
    params: Mapped[dict[str, Any]] = mapped_column(JSONB)
    params_key: Mapped[str] = mapped_column(String(400))
    repeat: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(20), default="queued")
    error: Mapped[str | None] = mapped_column(Text)
    worker: Mapped[str | None] = mapped_column(String(200))
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    build_id: Mapped[int | None] = mapped_column(ForeignKey("server_build.id"))
    environment_id: Mapped[int | None] = mapped_column(ForeignKey("environment.id"))
    server_cpu_source: Mapped[str | None] = mapped_column(String(12))
    server_cpu_window: Mapped[str | None] = mapped_column(String(8))
    profiled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    campaign: Mapped[Campaign] = relationship(back_populates="cells")
    samples: Mapped[list[Sample]] = relationship(back_populates="cell", cascade="all, delete-orphan")
    build: Mapped[ServerBuild | None] = relationship()
    environment: Mapped[Environment | None] = relationship()
    profile: Mapped[CellProfile | None] = relationship(back_populates="cell", cascade="all, delete-orphan",
                                                       passive_deletes=True)


class Sample(Base):
    """One measured figure of a cell.

    Attributes:
        metric: ``throughput``, ``elapsed``, ``latency``, ``ops_rate``, ``errors``,
            ``bytes``, ``server_mem_uss``, ``server_mem_rss_minus_shared``,
            ``server_cpu``, ``client_cpu``, ``fairness``, ``late_sessions``, ``tcp``
            (kernel TCP counters of the phase), ``listen_backlog`` (docs/methodology.md).
        stat: which figure of the metric: ``value``; ``p50``/``p90``/``p99``/``max``
            for latency; ``start``/``loaded``/``end``/``peak`` for memory;
            ``user``/``system`` for CPU; the error kind for errors; the kernel's
            counter name for ``tcp`` (e.g. ``ListenOverflows``).
        value: the figure, in ``unit``.
        raw: optional raw data (per-operation latencies, per-client figures,
            memory timeline) as JSON.
    """

    __tablename__ = "sample"
    __table_args__ = (Index("ix_sample_cell_metric", "cell_id", "metric", "stat"),)

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    cell_id: Mapped[int] = mapped_column(ForeignKey("cell.id", ondelete="CASCADE"))
    metric: Mapped[str] = mapped_column(String(40))
    stat: Mapped[str] = mapped_column(String(20), default="value")
    value: Mapped[float] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(12))
    raw: Mapped[Any | None] = mapped_column(JSONB)

    cell: Mapped[Cell] = relationship(back_populates="samples")


class CellProfile(Base):
    """The server's CPU profile over one cell's measured phase (one row per profiled cell;
    runner.metrics.profile_data.ServerProfile as stored, runner/store/profiles.py).

    Attributes:
        profiler: ``perf`` or ``py-spy``.
        profiler_version: the profiler's own version string.
        rate_hz: sampling frequency, samples per second per CPU.
        duration_s: seconds the profiler ran.
        on_cpu: folded stacks of the on-CPU samples (lines ``frame;frame;... N``, N samples).
        off_cpu: folded stacks of off-CPU time (N in microseconds); None when not measured.
        on_cpu_s: CPU seconds the samples stand for (samples / rate_hz).
        off_cpu_s: seconds the server's threads spent blocked; None when not measured.
        syscalls: ``[{"name", "count", "total_s", "errors"}, ...]``, most time (or count) first.
        notes: what the profile could not see, one string each.
    """

    __tablename__ = "cell_profile"

    cell_id: Mapped[int] = mapped_column(ForeignKey("cell.id", ondelete="CASCADE"), primary_key=True)
    profiler: Mapped[str] = mapped_column(String(20))
    profiler_version: Mapped[str] = mapped_column(String(80))
    rate_hz: Mapped[int] = mapped_column(Integer)
    duration_s: Mapped[float] = mapped_column(Float)
    on_cpu: Mapped[str] = mapped_column(Text)
    off_cpu: Mapped[str | None] = mapped_column(Text)
    on_cpu_s: Mapped[float] = mapped_column(Float)
    off_cpu_s: Mapped[float | None] = mapped_column(Float)
    syscalls: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    notes: Mapped[list[str]] = mapped_column(JSONB, default=list)

    cell: Mapped[Cell] = relationship(back_populates="profile")


class SeriesPoint(Base):
    """One point of a history series (runner.history): the raw figures of the ``done``
    cells of one (campaign, server, track, workload, params_key, server version), for one
    series metric. Derived data: written by :func:`runner.store.points.refresh_points`
    from ``sample`` in the transaction that finishes a cell, never edited otherwise.

    Attributes:
        track: the spec's server ``label`` if given, else the variant as jsonb text.
        metric: series metric: ``""`` the workload's primary figure (stat ``value``),
            ``server_mem_uss`` / ``server_mem_rss_minus_shared`` (stat ``peak``, bytes),
            ``server_cpu_per_gib`` / ``server_cpu_per_op`` (stat ``value``; s/GiB, us/op).
        version: the cells' ``server_version``.
        seq: smallest ``cell.seq`` of the cells (orders points within a campaign).
        label: smallest ``cell.server_label`` (for compare links).
        env_class: largest environment class of the cells (None: none recorded).
        samples: the figures as stored in ``sample.value`` (bytes for memory), in run
            order (``cell.seq``, then ``sample.id``).
    """

    __tablename__ = "series_point"
    __table_args__ = (
        UniqueConstraint("server", "workload", "params_key", "track", "metric", "campaign_id", "version",
                         name="uq_series_point"),
        Index("ix_series_point_campaign", "campaign_id", "metric"),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    server: Mapped[str] = mapped_column(String(40))
    track: Mapped[str] = mapped_column(Text)
    workload: Mapped[str] = mapped_column(String(40))
    params_key: Mapped[str] = mapped_column(String(400))
    metric: Mapped[str] = mapped_column(String(40))
    version: Mapped[str] = mapped_column(String(60))
    seq: Mapped[int] = mapped_column(Integer)
    label: Mapped[str] = mapped_column(String(200))
    env_class: Mapped[str | None] = mapped_column(String(16))
    samples: Mapped[list[float]] = mapped_column(ARRAY(Float))


class NoiseCalibration(Base):
    """One A/A calibration of one history series in one environment class: the same
    build measured against itself in ``runs`` campaigns (``xferlab calibrate``;
    runner.history.calibration holds the method, docs/methodology.md "Noise calibration").

    Attributes:
        calibration: id shared by the rows of one ``xferlab calibrate`` invocation (the
            id of its first row).
        server, track, workload, params_key, metric: the series (runner.history.SeriesKey).
        figure: the sample metric of the series' figure (``throughput``, ``elapsed``,
            ``server_mem_uss``, ``server_cpu_per_gib``, ...), what ``min_effect_for`` is asked for.
        unit: unit of ``runs_samples`` (MiB for memory figures).
        env_class: the environment class of every run (Environment.env_class).
        version: the server version the runs measured; ``commit``: the source commit
            (40 hex) when the build came from a source, else None.
        campaign_ids: the A/A campaigns, in run order.
        runs_samples: per campaign, the raw samples of the figure (list of lists).
        noise_floor: relative range of the runs' medians, ``(max - min) / median``.
        cv: relative standard deviation of the runs' medians (sample stdev / mean).
        pairs, false_alarms: pairs of runs compared, and those the regression rule
            flagged at ``alpha`` and ``min_effect``; ``false_alarm_rate`` = their ratio.
        series_alarms: significant changes runner.history.series_changes finds in the
            runs taken as one series (step detection and newest point).
        alpha, min_effect: the thresholds the false alarms were counted with.
    """

    __tablename__ = "noise_calibration"
    __table_args__ = (Index("ix_noise_calibration_lookup", "figure", "env_class"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    calibration: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    server: Mapped[str] = mapped_column(String(40))
    track: Mapped[str] = mapped_column(Text)
    workload: Mapped[str] = mapped_column(String(40))
    params_key: Mapped[str] = mapped_column(String(400))
    metric: Mapped[str] = mapped_column(String(40))
    figure: Mapped[str] = mapped_column(String(40))
    unit: Mapped[str] = mapped_column(String(12))
    env_class: Mapped[str | None] = mapped_column(String(16))
    version: Mapped[str] = mapped_column(String(60), default="")
    commit: Mapped[str | None] = mapped_column(String(40))
    campaign_ids: Mapped[list[int]] = mapped_column(ARRAY(Integer))
    runs_samples: Mapped[list[list[float]]] = mapped_column(JSONB)
    noise_floor: Mapped[float] = mapped_column(Float)
    cv: Mapped[float] = mapped_column(Float)
    pairs: Mapped[int] = mapped_column(Integer)
    false_alarms: Mapped[int] = mapped_column(Integer)
    false_alarm_rate: Mapped[float] = mapped_column(Float)
    series_alarms: Mapped[int] = mapped_column(Integer)
    alpha: Mapped[float] = mapped_column(Float)
    min_effect: Mapped[float] = mapped_column(Float)


BISECT_STATUSES = ("queued", "running", "done", "failed", "cancelled")


class BisectJob(Base):
    """A bisect queued for the workers (the dashboard's bisect form); a worker claims it
    and runs runner.campaign.bisect.Bisector, every step a stored campaign.

    Attributes:
        status: one of :data:`BISECT_STATUSES` (``failed``: the bisect stopped, ``error`` says why;
            ``cancelled``: cancelled by a user, ``finished_at`` None while its worker still
            finishes the cell in flight).
        owner: ``host:pid`` of the worker running it (None while queued).
        request: the validated request (runner.campaign.bisect_job.BisectRequest, as JSON).
        steps: every measured commit so far, in order (runner.campaign.bisect.Step as JSON).
        log: the progress lines, in order (at most the last 500).
        commits_left, steps_left: the range left and git's estimate of steps to go at the
            last midpoint (None before the first).
        first_bad, subject, confirmed: the answer (40 hex, its subject line, whether the
            re-measure confirmed it).
        commits: every commit of the range in the repository's order, good end first, bad
            end last (40 hex each; runner.campaign.bisect.repo_order), None before the start.
        campaign_id: the campaign of the step in flight (None between steps).
    """

    __tablename__ = "bisect_job"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    status: Mapped[str] = mapped_column(String(12), default="queued", index=True)
    owner: Mapped[str | None] = mapped_column(String(200))
    request: Mapped[dict[str, Any]] = mapped_column(JSONB)
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, default=list)
    log: Mapped[list[str]] = mapped_column(JSONB, default=list)
    commits_left: Mapped[int | None] = mapped_column(Integer)
    steps_left: Mapped[int | None] = mapped_column(Integer)
    first_bad: Mapped[str | None] = mapped_column(String(40))
    subject: Mapped[str | None] = mapped_column(Text)
    confirmed: Mapped[bool | None] = mapped_column(Boolean)
    error: Mapped[str | None] = mapped_column(Text)
    commits: Mapped[list[str] | None] = mapped_column(JSONB)
    campaign_id: Mapped[int | None] = mapped_column(Integer)
