"""The data of a history: series keys, points (a summary of one campaign's samples) and the
verdict on two consecutive points. Method: the package docstring of :mod:`runner.history`."""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.report.stats import Summary, summarize
from runner.store.points import CAPACITY, CPU_COST, PEAK_MEMORY, PHASE_SUFFIX, PRIMARY, TREE_SUFFIX

DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT = 0.05
#: Campaigns that :func:`find_regressions` examines by default: the most recent ones
#: (highest ids). ``window=None`` examines whole series.
DEFAULT_WINDOW = 50
#: Runs shorter than this are not given to the step detector (only the pair rule).
MIN_DETECT_POINTS = 3
_MEMORY_NAMES = {"server_mem_uss": "peak USS", "server_mem_rss_minus_shared": "peak rss - shared"}
#: Memory series: sample metric -> human name; the ``peak`` stat, bytes shown as MiB; lower is better.
MEMORY_METRICS: dict[str, str] = {m: _MEMORY_NAMES[m] for m in PEAK_MEMORY}
_COST_FIGURES = {"server_cpu_per_gib": ("server CPU per GiB", "s/GiB"),
                 "server_cpu_per_op": ("server CPU per operation", "us/op")}
#: Server CPU per unit of work (runner.cell.samples.efficiency_samples; docs/methodology.md,
#: "Metrics"): sample metric -> (human name, unit); the ``value`` stat, as stored; lower is
#: better. Transfers have the per-GiB series, logins and QUITs the per-operation one; the
#: ``_tree`` series hold the process-tree figures of cells stored before the cgroup figure,
#: the ``_phase`` series the cgroup figures over the whole phase (set-up and teardown included).
COST_METRICS: dict[str, tuple[str, str]] = {
    **{m: _COST_FIGURES[m] for m in CPU_COST},
    # campaigns whose server CPU is a process-tree sum (runner.store.points.CPU_COST_TREE)
    **{m + TREE_SUFFIX: (_COST_FIGURES[m][0] + " (process tree)", _COST_FIGURES[m][1]) for m in CPU_COST},
    # cgroup figures over the whole phase (runner.store.points.CPU_COST_PHASE)
    **{m + PHASE_SUFFIX: (_COST_FIGURES[m][0] + " (whole phase)", _COST_FIGURES[m][1]) for m in CPU_COST}}
#: Sustainable users of a capacity search (runner.store.points.CAPACITY; docs/methodology.md,
#: "Capacity"): users, higher is better.
CAPACITY_METRICS: dict[str, str] = {CAPACITY: "sustainable users"}
#: Every series metric: ``""`` (the workload's primary figure), memory, CPU cost, then capacity.
SERIES_METRICS = (PRIMARY, *MEMORY_METRICS, *COST_METRICS, *CAPACITY_METRICS)
#: Bytes per MiB: memory series are shown in MiB.
MIB = float(2**20)


#: How :func:`track_text` shows the track of a server entry without label or variant options.
DEFAULT_TRACK = "default"
#: The placeholders of a workload's row title (runner.catalogue.workloads.WorkloadInfo.title)
#: and the parameter of a ``params_key`` that fills each.
_TITLE_PARAMS = {"clients": "clients", "size": "file_size", "body": "body_size", "duration": "duration",
                 "session": "session", "loop": "rate"}


def track_text(track: str) -> str:
    """A series' track as a person reads it: a spec label as it is; variant options (the
    canonical JSON object of runner.store.points.track_expr) as ``key=value`` items
    joined by ``, `` (JSON values: ``false``, ``512``, strings unquoted), e.g.
    ``{"use_sendfile": false}`` -> ``use_sendfile=false``; ``{}`` -> :data:`DEFAULT_TRACK`.
    Raises nothing: text that is not a JSON object is returned as it is."""
    if not track.startswith("{"):
        return track
    try:
        variant = json.loads(track)
    except ValueError:
        return track
    if not isinstance(variant, dict):
        return track
    if not variant:
        return DEFAULT_TRACK
    return ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v, separators=(',', ':'))}"
                     for k, v in variant.items())


def benchmark_title(workload: str, params_key: str) -> str:
    """The row title of ``workload`` with the parameters of ``params_key`` (the canonical
    ``k=v,k=v`` string of runner.catalogue.workloads.params_key) filled in, e.g.
    ``300 concurrent clients (connect, login)``; the workload's generic title (``N
    concurrent clients ...``) when the key lacks a value the title needs or holds one
    WorkloadParams refuses; the bare name of a workload not in the catalogue."""
    info = WORKLOADS.get(workload)
    if info is None:
        return workload
    given = dict(part.partition("=")[::2] for part in params_key.split(",") if "=" in part)
    if any(f"{{{slot}}}" in info.title and name not in given for slot, name in _TITLE_PARAMS.items()):
        return info.generic_title()
    values = {k: v for k, v in given.items() if k in _TITLE_PARAMS.values() and v != "None"}
    try:
        return info.title_for(WorkloadParams.model_validate(values))
    except ValidationError:
        return info.generic_title()


@dataclass(frozen=True)
class SeriesKey:
    """Identity of a series. ``track``: explicit label, or the variant as canonical JSON;
    ``metric``: ``""`` (primary figure), a key of :data:`MEMORY_METRICS` or of
    :data:`COST_METRICS`.

    Raises ValueError for any other metric."""

    server: str
    track: str
    workload: str
    params_key: str
    metric: str = PRIMARY

    def __post_init__(self) -> None:
        if self.metric not in SERIES_METRICS:
            raise ValueError(f"unknown series metric {self.metric!r}: use '' (the workload's primary figure) "
                             f"or one of {', '.join(SERIES_METRICS[1:])}")

    def as_dict(self) -> dict[str, str]:
        """JSON-ready dict (also the query parameters of ``/api/history``)."""
        return {"server": self.server, "track": self.track, "workload": self.workload,
                "params_key": self.params_key, "metric": self.metric}

    @property
    def figure(self) -> tuple[str, str, bool]:
        """``(sample metric, unit, higher_is_better)`` of the series' points."""
        if self.metric in COST_METRICS:
            return self.metric, COST_METRICS[self.metric][1], False
        if self.metric in CAPACITY_METRICS:
            return self.metric, "users", True
        if self.metric:
            return self.metric, "MiB", False
        info = WORKLOADS.get(self.workload)
        return (info.primary, info.unit, info.higher_is_better) if info else ("?", "", True)

    @property
    def benchmark(self) -> str:
        """The workload and figure, e.g. ``RETR (server -> client)`` for the primary
        figure, ``RETR (server -> client), server memory (peak USS)``, ``RETR (server ->
        client), server CPU per GiB``."""
        wl = benchmark_title(self.workload, self.params_key)
        if self.metric in COST_METRICS:
            return f"{wl}, {COST_METRICS[self.metric][0]}"
        if self.metric in CAPACITY_METRICS:
            return f"{wl}, {CAPACITY_METRICS[self.metric]}"
        return f"{wl}, server memory ({MEMORY_METRICS[self.metric]})" if self.metric else wl

    @property
    def title(self) -> str:
        """Human title: server, track unless the default one (:func:`track_text`), then
        :attr:`benchmark`, e.g. ``pyftpdlib: RETR (server -> client)``, ``pyftpdlib
        [use_sendfile=false]: RETR (server -> client)``, ``pyftpdlib pyftpdlib-dev: ...``."""
        text = track_text(self.track)
        track = "" if text == DEFAULT_TRACK else f" [{text}]" if self.track.startswith("{") else f" {text}"
        return f"{self.server}{track}: {self.benchmark}"


@dataclass
class Point:
    """One (campaign, version) of a series.

    Attributes:
        campaign_id, campaign_name, created_at: the campaign the samples come from.
        version: server version as run (``""`` when unknown).
        label: the cells' server label in that campaign (for compare links).
        env_class: environment class of the cells (None if not recorded).
        unit: unit of ``samples``.
        samples: raw values of the series' figure, one per done repeat, in run order.
        summary: median and CI of ``samples`` (computed on first access).
        median: median of ``samples``.
    """

    campaign_id: int
    campaign_name: str
    created_at: datetime | None
    version: str
    label: str
    env_class: str | None
    unit: str
    samples: list[float] = field(default_factory=list)
    _summary: Summary | None = field(default=None, repr=False, compare=False)

    @property
    def summary(self) -> Summary:
        """Median and CI of ``samples`` (:func:`runner.report.stats.summarize`). Raises ValueError when empty."""
        if self._summary is None:
            self._summary = summarize(self.samples)
        return self._summary

    @property
    def median(self) -> float:
        """Median of ``samples`` (without the CI work of :attr:`summary`)."""
        return self._summary.median if self._summary is not None else float(statistics.median(self.samples))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: campaign, version, env_class, n, median, ci_low, ci_high, samples."""
        s = self.summary
        return {"campaign_id": self.campaign_id, "campaign_name": self.campaign_name,
                "created_at": self.created_at.isoformat() if self.created_at else None,
                "version": self.version, "label": self.label, "env_class": self.env_class, "unit": self.unit,
                "n": len(self.samples), "median": s.median, "ci_low": s.ci_low, "ci_high": s.ci_high,
                "samples": self.samples}


@dataclass
class Change:
    """Two consecutive points of a series and the verdict.

    Attributes:
        key: the series.
        before, after: the two points (before is older).
        metric, unit, higher_is_better: the figure compared.
        ratio: ``after.median / before.median`` (None if before's median is 0).
        effect: relative change, positive = worse: of the segment levels for a candidate
            (``level_before`` -> ``level_after``), else of the two points' medians.
        p_value: two-sided Mann-Whitney U p-value on the raw samples of the two segments
            (None when no test was made: not a candidate, the environment changed, or
            |effect| < min_effect).
        significant: ``q_value < alpha``, |effect| >= min_effect, environment unchanged.
        kind: ``"regression"``, ``"improvement"``, ``"env_changed"`` or ``"same"``.
        q_value: Benjamini-Hochberg adjusted p-value over every test of the call (None
            when untested).
        method: why the pair was examined: ``"step"`` (detected step), ``"latest"`` (the
            newest point of a run), None (not a candidate).
        level_before, level_after: the levels of the segments on each side (median of
            their points' medians), for candidates.
        points_before, points_after: number of points in those segments.
    """

    key: SeriesKey
    before: Point
    after: Point
    metric: str
    unit: str
    higher_is_better: bool
    ratio: float | None
    effect: float | None
    p_value: float | None
    significant: bool
    kind: str
    q_value: float | None = None
    method: str | None = None
    level_before: float | None = None
    level_after: float | None = None
    points_before: int = 0
    points_after: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the change (points without their raw samples)."""
        def pt(p: Point) -> dict[str, Any]:
            d = p.as_dict()
            d.pop("samples")
            return d

        return {"series": self.key.as_dict(), "title": self.key.title, "metric": self.metric, "unit": self.unit,
                "higher_is_better": self.higher_is_better, "before": pt(self.before), "after": pt(self.after),
                "ratio": self.ratio, "effect": self.effect, "p_value": self.p_value,
                "significant": self.significant, "kind": self.kind, "q_value": self.q_value,
                "method": self.method, "level_before": self.level_before, "level_after": self.level_after,
                "points_before": self.points_before, "points_after": self.points_after}
