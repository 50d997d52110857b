"""History and regressions: one timeline per series across campaigns and versions.

A *series* is ``(server, track, workload, params_key)``: ``server`` is the server name
(``pyftpdlib``), ``track`` the explicit ``label`` of the spec's server entry when one
was given (a development line whose options change keeps one series), else the
variant options as canonical JSON (``{}``, ``{"use_sendfile": false}``). Each
*point* of a series is one (campaign, server version): the raw samples of the
workload's primary metric (throughput in MiB/s, or elapsed in s) from its ``done``
cells, summarised as a median with its confidence interval
(:func:`runner.report.stats.summarize`, order-statistics CI).

A *change* is a pair of consecutive points. It is *significant* when the
two-sided Mann-Whitney U test on the raw samples (:func:`runner.report.stats.mann_whitney_p`,
scipy.stats.mannwhitneyu) gives ``p < alpha`` **and** the relative change of the
medians is at least ``min_effect`` (0.05 = 5%); it is a *regression* when the later
point is worse (lower throughput, longer elapsed), else an *improvement*. When the
environment class differs (kernel, CPU, sysctls, backend: ``Environment.env_class``)
the change is marked ``env_changed`` and never reported as significant: the two
points are not comparable.
"""
from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Text, and_, cast, func, literal, or_, select
from sqlalchemy.orm import Session

from runner.load.workloads import CLASSIC_SUITE, WORKLOADS
from runner.report.stats import CONFIDENCE, Summary, mann_whitney_p, median_ci_rank, summarize
from runner.store.models import Campaign, Cell, Environment, Sample

DEFAULT_ALPHA = 0.05
DEFAULT_MIN_EFFECT = 0.05


@dataclass(frozen=True)
class SeriesKey:
    """Identity of a series. ``track``: explicit label, or the variant as canonical JSON."""

    server: str
    track: str
    workload: str
    params_key: str

    def as_dict(self) -> dict[str, str]:
        """JSON-ready dict (also the query parameters of ``/api/history``)."""
        return {"server": self.server, "track": self.track, "workload": self.workload,
                "params_key": self.params_key}

    @property
    def title(self) -> str:
        """Human title, e.g. ``pyftpdlib {} RETR (server -> client) [duration=0.2,...]``."""
        wl = WORKLOADS[self.workload].title if self.workload in WORKLOADS else self.workload
        track = "" if self.track == "{}" else f" {self.track}"
        return f"{self.server}{track}: {wl}"


@dataclass
class Point:
    """One (campaign, version) of a series.

    Attributes:
        campaign_id, campaign_name, created_at: the campaign the samples come from.
        version: server version as run (``""`` when unknown).
        label: the cells' server label in that campaign (for compare links).
        env_class: environment class of the cells (None if not recorded).
        samples: raw primary-metric values (unit ``unit``), one per done repeat.
        summary: median and CI of ``samples``.
    """

    campaign_id: int
    campaign_name: str
    created_at: datetime | None
    version: str
    label: str
    env_class: str | None
    unit: str
    samples: list[float] = field(default_factory=list)
    summary: Summary | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: campaign, version, env_class, n, median, ci_low, ci_high, samples."""
        s = self.summary
        return {"campaign_id": self.campaign_id, "campaign_name": self.campaign_name,
                "created_at": self.created_at.isoformat() if self.created_at else None,
                "version": self.version, "label": self.label, "env_class": self.env_class, "unit": self.unit,
                "n": len(self.samples), "median": s.median if s else None,
                "ci_low": s.ci_low if s else None, "ci_high": s.ci_high if s else None,
                "samples": self.samples}


@dataclass
class Change:
    """Two consecutive points of a series and the verdict.

    Attributes:
        key: the series.
        before, after: the two points (before is older).
        metric, unit, higher_is_better: the primary metric compared.
        ratio: ``after.median / before.median`` (None if before's median is 0).
        effect: relative change oriented so that positive = worse
            (``before/after - 1`` for throughput, ``after/before - 1`` for elapsed).
        p_value: two-sided Mann-Whitney U p-value on the raw samples (None when
            no test was made: the environment changed, or |effect| < min_effect so
            the change cannot be significant anyway).
        significant: p < alpha and |effect| >= min_effect, environment unchanged.
        kind: ``"regression"``, ``"improvement"``, ``"env_changed"`` or ``"same"``.
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

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the change (points without their raw samples)."""
        def pt(p: Point) -> dict[str, Any]:
            d = p.as_dict()
            d.pop("samples")
            return d

        return {"series": self.key.as_dict(), "title": self.key.title, "metric": self.metric, "unit": self.unit,
                "higher_is_better": self.higher_is_better, "before": pt(self.before), "after": pt(self.after),
                "ratio": self.ratio, "effect": self.effect, "p_value": self.p_value,
                "significant": self.significant, "kind": self.kind}


def _track_expr():
    """SQL expression of a cell's track: the spec label if given, else the variant as
    jsonb text (PostgreSQL's canonical form, e.g. ``{"use_sendfile": false}``)."""
    return func.coalesce(Cell.server_spec["label"].astext, cast(Cell.variant, Text))


def _primary_filter():
    """WHERE clause selecting each workload's primary-metric sample (stat ``value``)."""
    by_metric: dict[str, list[str]] = defaultdict(list)
    for name, info in WORKLOADS.items():
        by_metric[info.primary].append(name)
    return and_(Sample.stat == "value",
                or_(*(and_(Cell.workload.in_(names), Sample.metric == metric)
                      for metric, names in by_metric.items())))


def list_series(session: Session) -> list[dict[str, Any]]:
    """Every series with at least one done cell, with its number of points and last campaign.

    Returns dicts ``{server, track, workload, params_key, title, points, last_campaign}``
    ordered by server, track, classic-suite order of the workload, params_key."""
    track = _track_expr().label("track")
    rows = session.execute(
        select(Cell.server, track, Cell.workload, Cell.params_key,
               func.count(func.distinct(func.concat(Cell.campaign_id, literal(":"), Cell.server_version))),
               func.max(Cell.campaign_id))
        .where(Cell.status == "done")
        .group_by(Cell.server, track, Cell.workload, Cell.params_key)).all()
    order = {w: i for i, w in enumerate(CLASSIC_SUITE)}
    out = []
    for server, tr, workload, pkey, npoints, last in rows:
        k = SeriesKey(server, tr, workload, pkey)
        out.append({**k.as_dict(), "title": k.title, "points": int(npoints), "last_campaign": int(last)})
    out.sort(key=lambda d: (d["server"], d["track"], order.get(d["workload"], 99), d["params_key"]))
    return out


@lru_cache(maxsize=256)
def _ci_rank(n: int) -> tuple[int, float]:
    return median_ci_rank(n, CONFIDENCE)


def fast_summary(samples: list[float]) -> Summary:
    """Same result as :func:`runner.report.stats.summarize` (median, order-statistics CI
    of the median at 95%, mean, stdev, min, max), with the CI rank (a scipy.stats.binom
    computation) cached per sample count: a series has hundreds of points of equal n.
    Raises ValueError on empty input."""
    if not samples:
        raise ValueError("samples is empty: at least one sample is needed")
    if any(not math.isfinite(v) for v in samples):
        return summarize(samples)  # raises with the message of the report layer
    values = sorted(samples)
    n = len(values)
    median = float(statistics.median(values))
    mean = float(statistics.fmean(values))
    if n < 2:
        return Summary(n, median, None, None, None, mean, None, values[0], values[-1], None)
    j, coverage = _ci_rank(n)
    lo, hi = values[j - 1], values[n - j]
    rel = (hi - lo) / 2.0 / abs(median) if median != 0 else None
    return Summary(n, median, lo, hi, coverage, mean, float(statistics.stdev(values)), values[0], values[-1], rel)


def _points_from_rows(rows) -> dict[SeriesKey, list[Point]]:
    """Group rows ``(server, track, workload, params_key, campaign_id, campaign name,
    created_at, version, label, env_class, seq, value)`` into ordered points per series."""
    acc: dict[SeriesKey, dict[tuple[int, str], Point]] = defaultdict(dict)
    first_seq: dict[tuple[SeriesKey, int, str], int] = {}
    for server, tr, workload, pkey, cid, cname, created, version, label, env_class, seq, value in rows:
        key = SeriesKey(server, tr, workload, pkey)
        pid = (cid, version or "")
        pts = acc[key]
        if pid not in pts:
            info = WORKLOADS.get(workload)
            pts[pid] = Point(cid, cname, created, version or "", label, env_class, info.unit if info else "")
            first_seq[(key, cid, version or "")] = seq
        p = pts[pid]
        p.samples.append(float(value))
        if p.env_class is None and env_class is not None:
            p.env_class = env_class
        first_seq[(key, cid, version or "")] = min(first_seq[(key, cid, version or "")], seq)
    out: dict[SeriesKey, list[Point]] = {}
    for key, pts in acc.items():
        ordered = sorted(pts.values(), key=lambda p: (p.campaign_id, first_seq[(key, p.campaign_id, p.version)]))
        for p in ordered:
            p.summary = fast_summary(p.samples)
        out[key] = ordered
    return out


def _rows_query(where=None):
    track = _track_expr().label("track")
    q = (select(Cell.server, track, Cell.workload, Cell.params_key, Cell.campaign_id, Campaign.name,
                Campaign.created_at, Cell.server_version, Cell.server_label, Environment.env_class, Cell.seq,
                Sample.value)
         .join(Sample, Sample.cell_id == Cell.id)
         .join(Campaign, Campaign.id == Cell.campaign_id)
         .outerjoin(Environment, Environment.id == Cell.environment_id)
         .where(Cell.status == "done", _primary_filter()))
    if where is not None:
        q = q.where(where)
    return q


def series_points(session: Session, *, key: SeriesKey) -> list[Point]:
    """The points of one series, oldest campaign first (within a campaign, in the
    order its servers ran). Returns [] for an unknown series. Raises nothing else."""
    where = and_(Cell.server == key.server, Cell.workload == key.workload, Cell.params_key == key.params_key,
                 _track_expr() == key.track)
    return _points_from_rows(session.execute(_rows_query(where)).all()).get(key, [])


def compare_points(key: SeriesKey, before: Point, after: Point, *, alpha: float = DEFAULT_ALPHA,
                   min_effect: float = DEFAULT_MIN_EFFECT) -> Change:
    """The verdict on two consecutive points (see the module docstring).

    Raises ValueError when alpha is not in (0, 1] or min_effect < 0."""
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    if min_effect < 0:
        raise ValueError(f"min_effect must be >= 0, got {min_effect}")
    info = WORKLOADS.get(key.workload)
    metric, unit, hib = (info.primary, info.unit, info.higher_is_better) if info else ("?", "", True)
    mb, ma = before.summary.median, after.summary.median  # type: ignore[union-attr]
    ratio = ma / mb if mb else None
    effect = None
    if mb and ma:
        effect = (mb / ma - 1.0) if hib else (ma / mb - 1.0)
    if before.env_class != after.env_class:
        return Change(key, before, after, metric, unit, hib, ratio, effect, None, False, "env_changed")
    if effect is None or abs(effect) < min_effect:
        # below the minimum effect nothing can be significant: skip the test (p_value None)
        return Change(key, before, after, metric, unit, hib, ratio, effect, None, False, "same")
    p = mann_whitney_p(before.samples, after.samples)
    significant = p < alpha
    kind = "same" if not significant else ("regression" if effect > 0 else "improvement")
    return Change(key, before, after, metric, unit, hib, ratio, effect, p, significant, kind)


def series_changes(key: SeriesKey, points: list[Point], *, alpha: float = DEFAULT_ALPHA,
                   min_effect: float = DEFAULT_MIN_EFFECT) -> list[Change]:
    """Changes between each pair of consecutive points of a series (len(points) - 1 of them)."""
    return [compare_points(key, a, b, alpha=alpha, min_effect=min_effect) for a, b in zip(points, points[1:])]


def find_regressions(session: Session, *, alpha: float = DEFAULT_ALPHA, min_effect: float = DEFAULT_MIN_EFFECT,
                     include_improvements: bool = True, include_env_changes: bool = True) -> list[Change]:
    """Significant changes (and environment changes) between consecutive points of
    every series, newest ``after`` campaign first, regressions before improvements.

    Args:
        alpha: significance level of the Mann-Whitney U test, in (0, 1].
        min_effect: minimum relative change of the medians (0.05 = 5%), >= 0.
        include_improvements: also list significant improvements.
        include_env_changes: also list consecutive points whose environment class differs.

    Raises ValueError for an out-of-range alpha or min_effect."""
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    if min_effect < 0:
        raise ValueError(f"min_effect must be >= 0, got {min_effect}")
    out = []
    for key, points in _points_from_rows(session.execute(_rows_query()).all()).items():
        for ch in series_changes(key, points, alpha=alpha, min_effect=min_effect):
            if ch.kind == "regression" or (include_improvements and ch.kind == "improvement") or (
                    include_env_changes and ch.kind == "env_changed"):
                out.append(ch)
    rank = {"regression": 0, "improvement": 1, "env_changed": 2}
    out.sort(key=lambda c: (-c.after.campaign_id, rank[c.kind], c.key.server, c.key.track, c.key.workload))
    return out
