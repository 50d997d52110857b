"""CSV export (stdlib ``csv``): raw, unrounded values, never the formatted texts.

* A Table (or several) -> its ``records`` (see each table builder for the keys):
  medians, CI bounds and coverage, n, p-values... as Python ``repr`` floats
  (shortest round-trip form), ``None`` as an empty field. Several tables are
  concatenated with a ``table`` column (their title) in front, and the union of
  keys as header.
* CampaignData -> one line per series: ``campaign, server, workload, params_key,
  title, metric, unit, checkpoint, higher_is_better``, the summary
  (``n, median, ci_low, ci_high, ci_coverage, mean, stdev, min, max``), then every
  raw sample in ``sample_1 .. sample_N`` (N = the largest repeat count; shorter
  series leave trailing fields empty). A campaign with a sweep of a sustained workload
  (runner.report.saturation) also gets, per curve, the derived rows of metric
  ``saturation_knee`` and ``saturation_all_at_rate`` (unit ``clients``; the N in
  ``median``, empty when there is none). A campaign whose cells stored kernel TCP counters
  (runner.report.data.CellTcp) gets one row per cell and non-zero counter, metric ``tcp``,
  the kernel's counter name in ``checkpoint``, the count in ``median`` and ``sample_1``,
  and per cell one row of metric ``listen_backlog`` when it was read; the header then
  ends with ``repeat`` (0 = first) and ``status`` (done, failed), filled in those rows.
  A campaign with ``mixed`` cells (runner.report.data.MixedRow) gets, per operation kind
  and per size bucket, rows of metric ``mixed_op_FIG`` / ``mixed_bucket_FIG`` (FIG: ``ops``,
  ``ops_rate``, ``mib_s``, ``p50``, ``p99``, ``p999``, ``service_p99``, ``errors``), the kind or bucket in
  ``checkpoint``, the median over the repeats in ``median``, the repeats in ``n``.

Formula injection (OWASP, "CSV Injection"): a *text* cell starting with ``=``, ``+``,
``-``, ``@``, a tab or a line break is prefixed with a single quote, so a
spreadsheet shows it as text instead of evaluating it. Numbers (int, float, bool)
are written as they are, so ``-0.04`` stays numeric; text that does not start with
one of those characters is unchanged. A carriage return inside text becomes ``\n``
(the writer quotes fields holding its line terminator ``\n`` but not a bare ``\r``,
which would otherwise split the row for a reader).
"""
from __future__ import annotations

import csv as _csv
import io
from collections.abc import Sequence
from typing import Any

from runner.report.data import CampaignData
from runner.report.saturation import curves
from runner.report.stats import summarize
from runner.report.tables import Table, as_tables

#: First characters that make a spreadsheet read a cell as a formula (OWASP CSV Injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")

SUMMARY_FIELDS = ("n", "median", "ci_low", "ci_high", "ci_coverage", "mean", "stdev", "min", "max")


def neutralise(value: object) -> object:
    """A CSV field for ``value``: ``None`` -> ``""``; in a ``str``, ``\r\n`` and ``\r``
    become ``\n``, and one starting with a formula character (:data:`FORMULA_START`)
    gets a leading ``'``; anything else (numbers) as it is."""
    if value is None:
        return ""
    if isinstance(value, str):
        if "\r" in value:
            value = value.replace("\r\n", "\n").replace("\r", "\n")
        if value.startswith(FORMULA_START):
            return "'" + value
    return value


def _write(header: list[str], rows: list[dict]) -> str:
    buf = io.StringIO()
    w = _csv.DictWriter(buf, fieldnames=[neutralise(h) for h in header], lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({neutralise(k): neutralise(v) for k, v in r.items()})
    return buf.getvalue()


def render_data(data: CampaignData) -> str:
    """Every series of ``data`` with its summary and raw samples (see module doc)."""
    width = max((len(s.samples) for s in data.series), default=0)
    header = ["campaign", "server", "workload", "params_key", "title", "metric", "unit",
              "checkpoint", "higher_is_better", *SUMMARY_FIELDS,
              *(f"sample_{i}" for i in range(1, width + 1))]
    rows = []
    for s in data.series:
        summ = summarize(s.samples) if s.samples else None
        row: dict[str, Any] = {"campaign": data.name, "server": s.server, "workload": s.workload,
               "params_key": s.params_key, "title": s.title, "metric": s.metric,
               "unit": s.unit, "checkpoint": s.checkpoint, "higher_is_better": s.higher_is_better}
        row.update({f: (getattr(summ, f) if summ else None) for f in SUMMARY_FIELDS})
        row.update({f"sample_{i}": v for i, v in enumerate(s.samples, 1)})
        rows.append(row)
    for c in curves(data):
        for metric, n in (("saturation_knee", c.knee), ("saturation_all_at_rate", c.all_at_rate)):
            rows.append({"campaign": data.name, "server": c.server, "workload": c.workload,
                         "params_key": c.params_key, "title": c.title, "metric": metric, "unit": "clients",
                         "checkpoint": None, "higher_is_better": True, "median": n})
    if data.tcp:
        header += ["repeat", "status"]
        if width == 0:
            header.insert(header.index("repeat"), "sample_1")
    for t in data.tcp:
        cell = {"campaign": data.name, "server": t.server, "workload": t.workload, "params_key": t.params_key,
                "title": t.title, "unit": "count", "higher_is_better": False, "n": 1,
                "repeat": t.repeat, "status": t.status}
        for name, count in t.counters.items():
            rows.append({**cell, "metric": "tcp", "checkpoint": name, "median": count, "sample_1": count})
        if t.listen_backlog is not None:
            rows.append({**cell, "metric": "listen_backlog", "checkpoint": None, "median": t.listen_backlog,
                         "sample_1": t.listen_backlog})
    units = {"ops": "count", "ops_rate": "1/s", "mib_s": "MiB/s", "p50": "ms", "p99": "ms", "p999": "ms",
             "service_p99": "ms", "errors": "count"}
    for m in data.mixed:
        for fig, unit in units.items():
            rows.append({"campaign": data.name, "server": m.server, "workload": m.workload,
                         "params_key": m.params_key, "title": m.title, "metric": f"mixed_{m.group}_{fig}",
                         "unit": unit, "checkpoint": m.name, "higher_is_better": fig in ("ops", "ops_rate", "mib_s"),
                         "n": m.repeats, "median": getattr(m, fig)})
    return _write(header, rows)


def render(obj: Table | Sequence[Table] | CampaignData) -> str:
    """CSV text (``\\n`` line ends) of a Table's records, several Tables' records,
    or a CampaignData's series with every raw sample. Raises TypeError for an
    unsupported ``obj``."""
    if isinstance(obj, CampaignData):
        return render_data(obj)
    tables = as_tables(obj)
    if len(tables) == 1:
        recs = tables[0].records
        return _write(list(recs[0]) if recs else [], recs)
    header = ["table"]
    for t in tables:
        for r in t.records:
            header += [k for k in r if k not in header]
    return _write(header, [{"table": t.title, **r} for t in tables for r in t.records])
