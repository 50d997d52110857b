"""History and regressions: one timeline per series across campaigns and versions.

A *series* is ``(server, track, workload, params_key, metric)``: ``server`` is the server
name (``pyftpdlib``), ``track`` the explicit ``label`` of the spec's server entry when
one was given (a development line whose options change keeps one series), else the
variant options as canonical JSON (``{}``, ``{"use_sendfile": false}``); ``metric`` is
``""`` for the workload's primary figure (throughput in MiB/s, or elapsed in s, stat
``value``), a memory figure, the cell's **peak** ``server_mem_uss`` or
``server_mem_rss_minus_shared`` (shown in MiB = 2^20 bytes; lower is better), or the
server's **CPU per unit of work**, ``server_cpu_per_gib`` (s/GiB, transfers) or
``server_cpu_per_op`` (us/op, logins and QUITs; lower is better;
runner.cell.samples.efficiency_samples). Each *point* of a series is one (campaign, server
version): the raw samples of that figure from its ``done`` cells, summarised as a
median with its confidence interval (:func:`runner.report.stats.summarize`,
order-statistics CI). The points are kept in ``series_point`` when each cell is stored
(runner.store.points); this package reads them from there.

Regressions (method and sources: docs/methodology.md, "Regressions")
-----------------------------------------------------------------------
1. **Environment.** Consecutive points whose environment class differs (kernel, CPU,
   sysctls, backend: ``Environment.env_class``) are marked ``env_changed`` and never
   compared; the series is cut there into *runs* of comparable points.
2. **Step detection** in each run of 3 or more points, on the points' medians:
   :func:`runner.history.changepoint.detect_steps`, a penalised piecewise-constant L1
   fit with a Schwarz-type penalty (asv's ``step_detect`` objective, solved exactly).
   Each detected step is a *candidate* (``method="step"``). The newest point of a run
   is always a candidate too (``method="latest"``) when the detector has not already
   put a step there: one point cannot outweigh the penalty, yet "the last campaign got
   slower" is the question asked most. A run of 2 points has that one candidate.
3. **Effect.** For a candidate between points ``j-1`` and ``j`` the levels are the
   medians of the point medians of the detected segment before ``j`` and of the one
   starting at ``j``; the effect is their relative change oriented so that positive =
   worse (``before/after - 1`` when higher is better, ``after/before - 1`` otherwise).
   Below ``min_effect`` (default 5%) nothing is tested (``p_value`` None, kind ``same``).
4. **Test with false-discovery-rate control.** Each remaining candidate gets the
   two-sided Mann-Whitney U p-value of the raw samples of the two segments
   (:func:`runner.report.stats.mann_whitney_p`); the p-values of all candidates of the
   call (one series for :func:`series_changes`, every series for
   :func:`find_regressions`) are adjusted with Benjamini-Hochberg
   (``scipy.stats.false_discovery_control``). A candidate is *significant* when its
   adjusted ``q_value < alpha``: a ``regression`` when the effect is positive, else an
   ``improvement``.
"""
from __future__ import annotations

from runner.history.changes import compare_points, find_regressions, series_changes
from runner.history.overview import FIGURES, SPARK_POINTS, figure_name, series_facets, series_overview
from runner.history.query import list_series, load_points, series_points
from runner.history.series import (
                                   COST_METRICS,
                                   DEFAULT_ALPHA,
                                   DEFAULT_MIN_EFFECT,
                                   DEFAULT_WINDOW,
                                   MEMORY_METRICS,
                                   MIN_DETECT_POINTS,
                                   PRIMARY,
                                   SERIES_METRICS,
                                   Change,
                                   Point,
                                   SeriesKey,
                                   benchmark_title,
                                   track_text,
)

__all__ = ["COST_METRICS", "DEFAULT_ALPHA", "DEFAULT_MIN_EFFECT", "DEFAULT_WINDOW", "FIGURES", "MEMORY_METRICS",
           "MIN_DETECT_POINTS", "PRIMARY", "SERIES_METRICS", "SPARK_POINTS", "Change", "Point", "SeriesKey",
           "benchmark_title", "compare_points", "figure_name", "find_regressions", "list_series", "load_points",
           "series_changes", "series_facets", "series_overview", "series_points", "track_text"]
