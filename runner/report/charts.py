"""The data of the HTML report's charts, from :class:`~runner.report.data.CampaignData` alone:
a JSON-ready dict that the report embeds (``<script type="application/json">``) and its
script (``templates/report.js``) draws with Chart.js, as the dashboard draws the same charts.

Five kinds of chart, each a list in :func:`chart_data`'s result:

* ``bars``: one chart per benchmark row of the campaign table (the row's primary metric),
  one bar per server at the median of the repeats, with the 95% CI of the median as a
  whisker (runner.report.stats.summarize). Rows that are points of a saturation curve are
  left to the saturation chart.
* ``ratios``: the classic comparison, one chart per server against the reference: for each
  benchmark how many times faster (or better: fewer seconds, less latency) the server is,
  ``1 / slowdown`` of runner.report.stats.compare, on a log axis around 1, with the ratio's
  words and whether Mann-Whitney U found the difference significant; the geometric mean last.
* ``memory``: per server, its USS over time during each workload's first ``done`` cell
  (:attr:`CampaignData.timelines`), MiB against seconds since the server started.
* ``fairness``: Jain's index over the clients of each N-client benchmark, per server
  (median of the repeats), and the per-client curves of every N-client cell
  (:attr:`CampaignData.client_curves`), grouped by (server, benchmark).
* ``saturation``: the curves of runner.report.saturation.curves (throughput and p99
  against N, the knee).
"""
from __future__ import annotations

import math
from typing import Any

from runner.report.data import CampaignData
from runner.report.saturation import curve_key, curves
from runner.report.stats import summarize
from runner.report.tables import FAIRNESS_METRIC, campaign_table, comparison_table

#: MiB, the unit of the memory charts.
MIB = 1 << 20


def _num(x: float | None, digits: int = 6) -> float | None:
    """``x`` with ``digits`` significant digits (a smaller file; the charts draw a few hundred
    pixels), None for None or a value that is not finite (JSON has no NaN)."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


def _in_curve(data: CampaignData) -> set[tuple[str, str, int]]:
    """(workload, params_key without ``clients``, N) of every point of a saturation curve."""
    return {(c.workload, c.params_key, p.clients) for c in curves(data) for p in c.points}


def bar_charts(data: CampaignData) -> list[dict[str, Any]]:
    """One chart per benchmark row: ``{"title", "unit", "higher_is_better", "bars": [{"server",
    "median", "ci_low", "ci_high", "coverage", "n"}]}`` (servers in campaign order; a server
    without the row is left out; CI bounds and ``coverage``, the probability that the interval
    covers the true median, None for fewer than two repeats). Rows of saturation curves left out."""
    in_curves = _in_curve(data)
    hib = {w: f.higher_is_better for w, f in data.workloads.items()}
    charts: dict[tuple[str, str], dict[str, Any]] = {}
    for rec in campaign_table(data).records:
        key = (rec["workload"], rec["params_key"])
        ck = curve_key(key[1])
        if rec["median"] is None or (ck is not None and (key[0], *ck) in in_curves):
            continue
        chart = charts.setdefault(key, {"title": rec["title"], "unit": rec["unit"],
                                        "higher_is_better": hib.get(rec["workload"], True), "bars": []})
        chart["bars"].append({"server": rec["server"], "median": _num(rec["median"]), "ci_low": _num(rec["ci_low"]),
                              "ci_high": _num(rec["ci_high"]), "coverage": _num(rec["ci_coverage"], 4),
                              "n": rec["n"]})
    order = {w: i for i, w in enumerate(data.workloads)}
    return [charts[k] for k in sorted(charts, key=lambda k: order.get(k[0], len(order)))]


def ratio_charts(data: CampaignData, reference: str | None = None) -> list[dict[str, Any]]:
    """The classic comparison, one chart per server other than ``reference`` (default: the
    first server): ``{"reference", "server", "rows": [{"title", "better" (times better than
    the reference: 1 / slowdown; > 1 better, < 1 worse), "text" (the table's ratio words,
    ``"1.08x slower"``; when not significant ``"1.08x slower, not significant"``),
    "significant"}], "geomean"}`` (``geomean``: the geometric mean of
    ``better`` over the rows, None without rows). Rows without a ratio on both sides are
    left out. Raises ValueError when ``reference`` is not a server of ``data``."""
    if len(data.servers) < 2:
        return []
    ref = reference or data.servers[0]
    out = []
    for other in data.servers:
        if other == ref:
            continue
        table = comparison_table(data, ref, other, ci=True)
        rows, geomean = [], None
        for row in table.rows:
            c = row.comparison
            if row.key == "geomean":
                slow = next((r["slowdown"] for r in table.records if r["workload"] == "geomean"), None)
                geomean = _num(1.0 / slow) if slow else None
            elif c is not None and c.slowdown and c.factor:
                text = row.cells[3].text if c.significant else f"{c.factor:.2f}x {c.direction}, not significant"
                rows.append({"title": row.cells[0].text, "better": _num(1.0 / c.slowdown), "text": text,
                             "significant": bool(c.significant)})
        if rows:
            out.append({"reference": ref, "server": other, "rows": rows, "geomean": geomean})
    return out


def memory_charts(data: CampaignData) -> list[dict[str, Any]]:
    """Per server with timelines, in campaign order: ``{"server", "lines": [{"title", "repeat",
    "points": [[t_s, USS MiB], ...]}]}``."""
    out = []
    for server in data.servers:
        lines = [{"title": t.title, "repeat": t.repeat,
                  "points": [[_num(x, 5), _num(y / MIB, 5)] for x, y in t.points]}
                 for t in data.timelines if t.server == server]
        if lines:
            out.append({"server": server, "lines": lines})
    return out


def fairness_charts(data: CampaignData) -> dict[str, Any]:
    """``{"jain": [{"title", "bars": [{"server", "median", "ci_low", "ci_high", "coverage", "n"}]}],
    "curves": [{"server", "title", "unit", "repeats": [{"repeat", "jain", "clients",
    "points": [[rank, rate], ...]}]}]}``: Jain's index of each N-client benchmark per server
    (``fairness_jain`` series; the same bars as :func:`bar_charts`), and the per-client curves
    grouped by (server, workload, parameters) in cell order."""
    jain: dict[tuple[str, str], dict[str, Any]] = {}
    for s in data.series:
        if s.metric != FAIRNESS_METRIC or not s.samples:
            continue
        summ = summarize(s.samples)
        chart = jain.setdefault((s.workload, s.params_key), {"title": s.title, "bars": []})
        chart["bars"].append({"server": s.server, "median": _num(summ.median), "ci_low": _num(summ.ci_low),
                              "ci_high": _num(summ.ci_high), "coverage": _num(summ.ci_coverage, 4), "n": summ.n})
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for c in data.client_curves:
        g = groups.setdefault((c.server, c.workload, c.params_key),
                              {"server": c.server, "title": c.title, "unit": c.unit, "repeats": []})
        g["repeats"].append({"repeat": c.repeat, "jain": _num(c.jain, 4), "clients": c.clients,
                             "points": [[x, _num(y, 5)] for x, y in c.points]})
    return {"jain": list(jain.values()), "curves": list(groups.values())}


def chart_data(data: CampaignData, *, reference: str | None = None) -> dict[str, Any]:
    """Every chart of the HTML report of ``data``: ``{"servers": [label] (campaign order: the
    colour of each server), "bars": bar_charts, "ratios":
    ratio_charts, "memory": memory_charts, "fairness": fairness_charts, "saturation":
    [Saturation.as_dict()]}`` (module docstring). JSON-ready: str, int, float (finite),
    bool, None, lists and dicts. Raises ValueError for an unknown ``reference``."""
    return {"servers": list(data.servers), "bars": bar_charts(data), "ratios": ratio_charts(data, reference),
            "memory": memory_charts(data),
            "fairness": fairness_charts(data),
            "saturation": [{**d, "points": list(d["points"])} for d in (c.as_dict() for c in curves(data))]}
