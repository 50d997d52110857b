"""Noise calibration (A/A): how far apart two measurements of the same build land, and
how often the regression rule would call that difference a change.

``xferlab calibrate`` measures one build against itself in N campaigns (the *runs*).
For each series those campaigns produce and each environment class with at least two
runs (method: docs/methodology.md, "Noise calibration"):

* the **noise floor** is the relative range of the runs' medians,
  ``(max m_i - min m_i) / median(m_i)``: the largest relative difference between two
  A/A runs, i.e. the effect a comparison must exceed before it can be told from noise
  at this sample size; ``cv`` is the sample standard deviation of the medians over
  their mean (reported beside it);
* the **false-alarm rate** is the fraction of the ``N (N - 1) / 2`` pairs of runs that the
  regression rule flags when comparing one run with another alone
  (:func:`runner.history.compare_points`: relative effect >= ``min_effect`` and
  two-sided Mann-Whitney U p < ``alpha`` on the raw samples). Every flag is false: the
  build did not change. ``series_alarms`` counts the significant changes
  :func:`runner.history.series_changes` (step detection, newest point) finds when the
  runs are read as one series.

:func:`min_effect_for` gives the minimum effect a comparison of a figure should use in
an environment class: the largest noise floor of the latest calibration of each series
of that figure and class, at least :data:`MIN_CALIBRATED_EFFECT`; :data:`DEFAULT_MIN_EFFECT`
(5%) when nothing is calibrated.
"""
from __future__ import annotations

import itertools
import statistics
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from runner.history.changes import compare_points, series_changes
from runner.history.provenance import point_contexts
from runner.history.query import load_points
from runner.history.series import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT, SERIES_METRICS, Point, SeriesKey
from runner.store.models import NoiseCalibration, SeriesPoint

#: Most A/A runs of one calibration (each run is a campaign).
MAX_RUNS = 20
#: The smallest minimum effect :func:`min_effect_for` returns for a calibrated figure:
#: a noise floor measured from a few runs underestimates the spread of many.
MIN_CALIBRATED_EFFECT = 0.01


@dataclass(frozen=True)
class AAResult:
    """The calibration of one series in one environment class (module docstring).

    Attributes: key, env_class, version, commit (None without a source), campaign_ids,
    runs_samples (per run, its raw samples), medians, noise_floor, cv, pairs,
    false_alarms, false_alarm_rate, series_alarms, alpha, min_effect."""

    key: SeriesKey
    env_class: str | None
    version: str
    commit: str | None
    campaign_ids: list[int]
    runs_samples: list[list[float]]
    medians: list[float]
    noise_floor: float
    cv: float
    pairs: int
    false_alarms: int
    false_alarm_rate: float
    series_alarms: int
    alpha: float
    min_effect: float


def pair_false_alarms(key: SeriesKey, points: list[Point], *, alpha: float, min_effect: float) -> tuple[int, int]:
    """``(flagged pairs, pairs)``: of every pair ``(i < j)`` of ``points`` (A/A runs of one
    build), those :func:`runner.history.compare_points` calls significant at ``alpha``
    and ``min_effect``. Raises ValueError for out-of-range thresholds."""
    pairs = list(itertools.combinations(range(len(points)), 2))
    flagged = sum(compare_points(key, points[i], points[j], alpha=alpha, min_effect=min_effect).significant
                  for i, j in pairs)
    return int(flagged), len(pairs)


def analyse(key: SeriesKey, points: list[Point], *, alpha: float = DEFAULT_ALPHA,
            min_effect: float = DEFAULT_MIN_EFFECT, commit: str | None = None) -> AAResult:
    """The A/A figures of ``points`` (at least 2 runs of one build in one environment
    class, oldest first; each with samples).

    Raises ValueError with fewer than 2 points, a point without samples, runs of
    different server versions, a median of 0 (no relative spread), or thresholds out of range."""
    if len(points) < 2:
        raise ValueError(f"{key.title}: {len(points)} A/A run(s); at least 2 are needed")
    if any(not p.samples for p in points):
        raise ValueError(f"{key.title}: a run has no samples")
    versions = {p.version for p in points}
    if len(versions) != 1:
        raise ValueError(f"{key.title}: the runs measured different versions {sorted(versions)}: not an A/A test")
    medians = [p.median for p in points]
    mid = float(statistics.median(medians))
    if mid <= 0:
        raise ValueError(f"{key.title}: median of the run medians is {mid}: no relative noise floor")
    flagged, pairs = pair_false_alarms(key, points, alpha=alpha, min_effect=min_effect)
    alarms = sum(c.significant for c in series_changes(key, points, alpha=alpha, min_effect=min_effect))
    return AAResult(key, points[0].env_class, points[0].version, commit, [p.campaign_id for p in points],
                    [list(p.samples) for p in points], medians, (max(medians) - min(medians)) / mid,
                    statistics.stdev(medians) / statistics.fmean(medians), pairs, flagged, flagged / pairs,
                    int(alarms), alpha, min_effect)


def calibrate_campaigns(session: Session, campaign_ids: list[int], *, alpha: float = DEFAULT_ALPHA,
                        min_effect: float = DEFAULT_MIN_EFFECT, metrics: tuple[str, ...] = SERIES_METRICS
                        ) -> list[AAResult]:
    """Analyse the A/A runs ``campaign_ids`` (2 to :data:`MAX_RUNS` campaigns of one build):
    :func:`analyse` of every series they have points of (among ``metrics``), per
    environment class with at least 2 runs. Stores nothing (:func:`store_results`).

    Raises ValueError for fewer than 2 or more than MAX_RUNS campaigns, or when no series
    has 2 runs in one environment class."""
    ids = list(dict.fromkeys(campaign_ids))
    if not 2 <= len(ids) <= MAX_RUNS:
        raise ValueError(f"an A/A calibration needs 2 to {MAX_RUNS} campaigns, got {len(ids)}")
    out = []
    for key, points in load_points(session, SeriesPoint.campaign_id.in_(ids), metrics=metrics).items():
        by_class: dict[str | None, list[Point]] = {}
        for p in points:
            by_class.setdefault(p.env_class, []).append(p)
        for cls_points in by_class.values():
            if len(cls_points) < 2:
                continue
            srcs = {c.source.commit for c in point_contexts(session, key=key, points=cls_points) if c.source}
            out.append(analyse(key, cls_points, alpha=alpha, min_effect=min_effect,
                               commit=next(iter(srcs)) if len(srcs) == 1 else None))
    if not out:
        raise ValueError(f"campaigns {ids}: no series has 2 done runs in one environment class")
    return out


def store_results(session: Session, results: list[AAResult]) -> list[NoiseCalibration]:
    """Write ``results`` as ``noise_calibration`` rows of one calibration (their
    ``calibration`` is the first row's id). Flushes; does not commit."""
    rows = []
    for r in results:
        row = NoiseCalibration(
            server=r.key.server, track=r.key.track, workload=r.key.workload, params_key=r.key.params_key,
            metric=r.key.metric, figure=r.key.figure[0], unit=r.key.figure[1], env_class=r.env_class,
            version=r.version, commit=r.commit, campaign_ids=r.campaign_ids, runs_samples=r.runs_samples,
            noise_floor=r.noise_floor, cv=r.cv, pairs=r.pairs, false_alarms=r.false_alarms,
            false_alarm_rate=r.false_alarm_rate, series_alarms=r.series_alarms, alpha=r.alpha,
            min_effect=r.min_effect)
        session.add(row)
        rows.append(row)
    session.flush()
    for row in rows:
        row.calibration = rows[0].id
    session.flush()
    return rows


def _latest_per_series(session: Session, *where) -> list[NoiseCalibration]:
    """The newest ``noise_calibration`` row of each (series, environment class) matching ``where``."""
    nc = NoiseCalibration
    newest = (select(func.max(nc.id)).where(*where)
              .group_by(nc.server, nc.track, nc.workload, nc.params_key, nc.metric, nc.env_class))
    return list(session.scalars(select(nc).where(nc.id.in_(newest)).order_by(nc.id)))


def latest_calibrations(session: Session) -> list[NoiseCalibration]:
    """The newest calibration row of every (series, environment class), oldest first."""
    return _latest_per_series(session)


def min_effect_for(metric: str, env_class: str | None, session: Session) -> float:
    """The minimum relative effect (0.05 = 5%) a comparison of figure ``metric`` in
    environment class ``env_class`` should require.

    ``metric`` is a sample metric (``throughput``, ``elapsed``, ``ops_rate``,
    ``server_mem_uss``, ``server_cpu_per_gib``, ...). Returns the largest noise floor of
    the newest calibration of each series of that figure and class, at least
    :data:`MIN_CALIBRATED_EFFECT`; :data:`DEFAULT_MIN_EFFECT` when none is stored.
    Raises nothing for an unknown metric (it is uncalibrated)."""
    found = calibrated_min_effect(metric, env_class, session)
    return DEFAULT_MIN_EFFECT if found is None else found


def calibrated_min_effect(metric: str, env_class: str | None, session: Session) -> float | None:
    """As :func:`min_effect_for`, but None when no calibration of figure ``metric`` in
    environment class ``env_class`` is stored (the caller keeps its own default)."""
    rows = _latest_per_series(session, NoiseCalibration.figure == metric, NoiseCalibration.env_class == env_class)
    if not rows:
        return None
    return max(MIN_CALIBRATED_EFFECT, max(r.noise_floor for r in rows))


class CalibrationIndex:
    """The newest calibration of every (series, environment class), read once
    (:func:`latest_calibrations`), for looking many series up."""

    def __init__(self, rows: list[NoiseCalibration]):
        self._own = {(SeriesKey(r.server, r.track, r.workload, r.params_key, r.metric), r.env_class): r
                     for r in rows}
        self._figure: dict[tuple[str, str | None], NoiseCalibration] = {}
        for r in rows:
            best = self._figure.get((r.figure, r.env_class))
            if best is None or r.noise_floor > best.noise_floor:
                self._figure[(r.figure, r.env_class)] = r

    def lookup(self, key: SeriesKey, env_class: str | None) -> NoiseCalibration | None:
        """The calibration of series ``key`` in ``env_class``; else, of the series of the
        same figure in that class, the one with the largest noise floor; None when that
        figure is uncalibrated in that class."""
        return self._own.get((key, env_class)) or self._figure.get((key.figure[0], env_class))


def calibration_for(session: Session, *, key: SeriesKey, env_class: str | None) -> NoiseCalibration | None:
    """:meth:`CalibrationIndex.lookup` of ``key`` and ``env_class`` (one series: reads the
    index of every calibration; for many, build one :class:`CalibrationIndex`)."""
    return CalibrationIndex(latest_calibrations(session)).lookup(key, env_class)


def expected_false_alarm_rate(row: NoiseCalibration, *, alpha: float, min_effect: float) -> float:
    """The false-alarm rate of the A/A runs of ``row`` at ``alpha`` and ``min_effect``
    (recomputed from its stored samples when the thresholds differ from the stored ones).
    Raises ValueError for out-of-range thresholds."""
    if row.alpha == alpha and row.min_effect == min_effect:
        return row.false_alarm_rate
    key = SeriesKey(row.server, row.track, row.workload, row.params_key, row.metric)
    pts = [Point(cid, "", None, row.version, "", row.env_class, row.unit, list(s))
           for cid, s in zip(row.campaign_ids, row.runs_samples)]
    flagged, pairs = pair_false_alarms(key, pts, alpha=alpha, min_effect=min_effect)
    return flagged / pairs
