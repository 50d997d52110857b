"""Table models built from :class:`~runner.report.data.CampaignData`.

A :class:`Table` is export-neutral: formatted cell texts with win/loss marks
(rendered bold in RST/Markdown, green/red in HTML, styled in rich), plus raw,
unrounded ``records`` for the CSV and JSON exports. Three tables:

* :func:`comparison_table` -- seed 000's "A vs. B" table, rows in catalogue
  order, pyperf ratio and significance, optional CI and seed speedup column, and a
  geometric-mean row (pyperf ``compare_to``).
* :func:`memory_table` -- seed 000's "Memory usage" table: "Starting with", then
  one row per workload, one column per server, binary units, lowest bold.
* :func:`campaign_table` -- every workload of every server: median, CI, n, errors
  (fairness too, when the campaign has N-client cells).

:func:`fairness_comparison` is :func:`comparison_table` on Jain's index.

Rows of the same workload with different parameters (e.g. 300 and 1000 clients)
are separate rows (keyed by ``params_key``); their titles differ.
"""
from __future__ import annotations

from collections.abc import Sequence

from runner.metrics.runqueue import client_bound, steal_shown
from runner.report import fmt
from runner.report.data import CampaignData, Series
from runner.report.model import Cell as Cell
from runner.report.model import Column as Column
from runner.report.model import Mark as Mark
from runner.report.model import Row as Row
from runner.report.model import Table as Table
from runner.report.stats import ALPHA, Comparison, Summary, compare, geometric_mean_slowdown, summarize

#: Memory metrics (bytes, recorded at checkpoints), see DESIGN.md "Metrics".
MEMORY_METRICS = ("server_mem_rss_minus_shared", "server_mem_uss", "server_cgroup_mem")

#: The fairness series of N-client cells: Jain's index over the clients (runner.metrics.fairness).
FAIRNESS_METRIC = "fairness_jain"


MEMORY_CAPTIONS = {
    "server_mem_rss_minus_shared": "Values on UNIX are calculated as (rss - shared)",
    "server_mem_uss": "Values are USS (unique set size)",
    "server_cgroup_mem": "Values are the container cgroup's memory.current",
}


# -- grouping ---------------------------------------------------------------

_Key = tuple[str, str]  # (workload, params_key)


def _row_key(key: _Key) -> str:
    return key[0] if not key[1] else f"{key[0]}[{key[1]}]"


def _ordered_keys(data: CampaignData, series: Sequence[Series]) -> list[_Key]:
    """(workload, params_key) in ``data.workloads`` order (the catalogue's), then others
    by first appearance."""
    seen: dict[_Key, int] = {}
    for s in series:
        seen.setdefault((s.workload, s.params_key), len(seen))
    suite = {w: i for i, w in enumerate(data.workloads)}
    return sorted(seen, key=lambda k: (suite.get(k[0], len(suite)), seen[k]))


def _primary_metric(data: CampaignData, workload: str, series: Sequence[Series]) -> str | None:
    """The workload's row metric (``data.workloads``), else the first non-memory metric seen."""
    if workload in data.workloads:
        return data.workloads[workload].primary
    for s in series:
        if s.workload == workload and s.checkpoint is None and s.metric not in MEMORY_METRICS:
            return s.metric
    return None


def _find(series: Sequence[Series], server: str, key: _Key, metric: str,
          checkpoint: str | None = None) -> Series | None:
    for s in series:
        if (s.server, s.workload, s.params_key, s.metric, s.checkpoint) == (
                server, key[0], key[1], metric, checkpoint) and s.samples:
            return s
    return None


def _title(data: CampaignData, series: Sequence[Series], key: _Key) -> str:
    for s in series:
        if (s.workload, s.params_key) == key and s.title:
            return s.title
    return data.workloads[key[0]].title if key[0] in data.workloads else key[0]


def _check_servers(data: CampaignData, servers: Sequence[str]) -> None:
    unknown = [s for s in servers if s not in data.servers]
    if unknown:
        raise ValueError(f"unknown server(s) {unknown!r}; campaign {data.name!r} has {data.servers!r}")


def _summary_record(prefix: str, s: Summary | None) -> dict:
    fields = ("n", "median", "ci_low", "ci_high", "ci_coverage", "mean", "stdev", "min", "max")
    return {f"{prefix}{f}": (getattr(s, f) if s is not None else None) for f in fields}


# -- comparison -------------------------------------------------------------

def comparison_table(data: CampaignData, server_a: str, server_b: str, *,
                     ci: bool = False, speedup: bool = False, alpha: float = ALPHA,
                     metric: str | tuple[str, ...] | None = None, geomean: bool = True,
                     title: str | None = None, words: tuple[str, str] = fmt.SPEED_WORDS) -> Table:
    """Seed 000's comparison table of ``server_a`` (reference, "old") vs ``server_b``
    ("new"), pyperf-style.

    Columns: ``title`` ("benchmark type"), ``a``, ``b`` (medians in the metric's
    unit, ``"1652.72 MiB/s"``; with ``ci=True`` ``"1652.72 MiB/s +- 2%"``),
    ``ratio`` (``"1.08x slower"`` / ``"1.08x faster"`` / ``"not significant"``:
    b relative to a, Mann-Whitney U at ``alpha``), and with ``speedup=True`` seed
    001's ``speedup`` column (``"+0.08x"``, positive when b is better). When b
    wins significantly, b's value, the ratio and the speedup are marked ``win``
    (and a's value is not); when it loses, a's value is ``win`` and the ratio and
    speedup are ``loss``. Not significant: no marks.

    Rows: one per (workload, params_key) in catalogue order (``CampaignData.workloads``), using the
    workload's primary metric (``metric`` overrides it; a tuple: the first of its metrics
    either server has for that row, e.g. :data:`COST_METRICS`; ``words``: the ratio's
    words for better and worse, ``("faster", "slower")`` unless the metric is not a speed,
    e.g. :func:`fairness_comparison`); a row missing on either side shows ``"n/a"``.
    Last, a ``"Geometric mean"`` row of the time-like ratios
    of all rows with a defined ratio (pyperf), when ``geomean`` and at least one.

    Records (CSV/JSON): per row ``server_a, server_b, workload, params_key, title,
    metric, unit, higher_is_better``, ``a_*`` and ``b_*`` summary fields, ``norm``
    (b/a medians), ``slowdown``, ``speedup``, ``p_value``, ``significant``.

    Raises:
        ValueError: a server is not in ``data.servers``, or ``server_a == server_b``.
    """
    _check_servers(data, [server_a, server_b])
    if server_a == server_b:
        raise ValueError(f"comparison_table: server_a and server_b are both {server_a!r}")
    columns = [Column("title", "benchmark type"), Column("a", server_a, True),
               Column("b", server_b, True), Column("ratio", "ratio")]
    if speedup:
        columns.append(Column("speedup", "speedup"))
    rows: list[Row] = []
    records: list[dict] = []
    comparisons: list[Comparison] = []
    for key in _ordered_keys(data, data.series):
        if isinstance(metric, tuple):
            m = next((x for x in metric
                      if _find(data.series, server_a, key, x) or _find(data.series, server_b, key, x)), None)
        else:
            m = metric or _primary_metric(data, key[0], data.series)
        if m is None:
            continue
        sa, sb = _find(data.series, server_a, key, m), _find(data.series, server_b, key, m)
        ref = sa if sa is not None else sb
        if ref is None:
            continue
        unit, hib = ref.unit, ref.higher_is_better
        c: Comparison | None = None
        if sa is not None and sb is not None:
            c = compare(sa.samples, sb.samples, hib, alpha=alpha)
            comparisons.append(c)
        sum_a = c.a if c else (summarize(sa.samples) if sa else None)
        sum_b = c.b if c else (summarize(sb.samples) if sb else None)
        win = c.winner if c else ""
        cells = [
            Cell(_title(data, data.series, key)),
            Cell(fmt.summary(sum_a, unit, ci=ci) if sum_a else fmt.NA, "win" if win == "a" else ""),
            Cell(fmt.summary(sum_b, unit, ci=ci) if sum_b else fmt.NA, "win" if win == "b" else ""),
        ]
        verdicts: dict[str, Mark] = {"b": "win", "a": "loss", "": ""}
        verdict = verdicts[win]
        cells.append(Cell(fmt.ratio(c, words=words) if c else fmt.NA, verdict))
        if speedup:
            cells.append(Cell(fmt.speedup(c) if c else fmt.NA, verdict))
        rows.append(Row(_row_key(key), tuple(cells), c, unit))
        records.append({
            "server_a": server_a, "server_b": server_b, "workload": key[0],
            "params_key": key[1], "title": cells[0].text, "metric": m, "unit": unit,
            "higher_is_better": hib, **_summary_record("a_", sum_a), **_summary_record("b_", sum_b),
            "norm": c.norm if c else None, "slowdown": c.slowdown if c else None,
            "speedup": c.speedup if c else None, "p_value": c.p_value if c else None,
            "significant": c.significant if c else None,
        })
    geo = geometric_mean_slowdown(comparisons) if geomean else None
    if geo is not None:
        cells = [Cell("Geometric mean"), Cell(""), Cell(""), Cell(fmt.normalized(geo))]
        if speedup:
            cells.append(Cell(fmt.speedup_value(1.0 / geo - 1.0)))
        rows.append(Row("geomean", tuple(cells)))
        empty = {k: None for k in records[0]}
        records.append({**empty, "server_a": server_a, "server_b": server_b,
                        "workload": "geomean", "params_key": "", "title": "Geometric mean",
                        "slowdown": geo, "speedup": 1.0 / geo - 1.0})
    return Table("comparison", title or f"{server_a} vs. {server_b}", tuple(columns), rows,
                 "", records)


def fairness_comparison(data: CampaignData, server_a: str, server_b: str, *, ci: bool = True,
                        speedup: bool = False, alpha: float = ALPHA) -> Table | None:
    """A vs. B on fairness: :func:`comparison_table` of the ``fairness_jain`` series
    (Jain's index over the clients of each N-client cell, higher is fairer; the same
    Mann-Whitney test), rows only where either server has it, ratio words ``higher`` /
    ``lower``, no geometric mean. None unless both servers have the series.
    Raises ValueError as :func:`comparison_table`."""
    if not all(any(s.server == x and s.metric == FAIRNESS_METRIC for s in data.series) for x in (server_a, server_b)):
        return None
    return comparison_table(data, server_a, server_b, ci=ci, speedup=speedup, alpha=alpha, metric=FAIRNESS_METRIC,
                            geomean=False, words=("higher", "lower"),
                            title=f"Fairness (Jain's index over the clients): {server_a} vs. {server_b}")


# -- memory -----------------------------------------------------------------

def memory_table(data: CampaignData, servers: Sequence[str] | None = None, *,
                 metric: str = "server_mem_rss_minus_shared", checkpoint: str = "peak",
                 title: str = "Memory usage") -> Table:
    """Seed 000's "Memory usage" table: rows x servers, values in binary units.

    Rows: ``"Starting with"`` -- the median of every ``"start"`` checkpoint sample of
    the server, pooled over all its workloads (each cell starts a fresh, idle
    server, so these are repeats of the same state); then one row per workload
    (catalogue order) with the median over repeats of the ``checkpoint``
    sample (default ``"peak"``: the highest value the sampler saw during the
    workload, the closest to ftpbench's measurement while its clients were still
    connected; ``"end"`` is the other choice).

    Values: ``metric`` in bytes (default ``server_mem_rss_minus_shared``, the seed's
    ``rss - shared``, summed over the server's process tree), printed as seed 000
    does (``6.7M``, ``352.0K``). The lowest median of each row is marked ``win``
    (bold), when at least two servers have a value and they are not all equal; no
    significance test is applied here.

    Records: long format, one per (row, server): ``row, title, metric, checkpoint,
    server`` and the summary fields (bytes, unrounded).

    Raises:
        ValueError: a server is not in ``data.servers``.
    """
    servers = list(servers) if servers is not None else list(data.servers)
    _check_servers(data, servers)
    columns = (Column("title", "benchmark type"),
               *(Column(f"server:{s}", s, True) for s in servers))
    mem = [s for s in data.series if s.metric == metric]
    rows: list[Row] = []
    records: list[dict] = []

    def add_row(key: str, title: str, ckpt: str, per_server: list[Summary | None]) -> None:
        medians = [s.median for s in per_server if s is not None]
        best = min(medians) if len(medians) >= 2 and len(set(medians)) > 1 else None
        cells = [Cell(title)] + [
            Cell(fmt.bytes2human(s.median) if s else fmt.NA,
                 "win" if s is not None and s.median == best else "")
            for s in per_server]
        rows.append(Row(key, tuple(cells), None, "bytes"))
        for server, s in zip(servers, per_server):
            records.append({"row": key, "title": title, "metric": metric, "checkpoint": ckpt,
                            "server": server, **_summary_record("", s)})

    starts = []
    for server in servers:
        pooled = [v for s in mem if s.server == server and s.checkpoint == "start"
                  for v in s.samples]
        starts.append(summarize(pooled) if pooled else None)
    if any(starts):
        add_row("start", "Starting with", "start", starts)
    for key in _ordered_keys(data, [s for s in mem if s.checkpoint == checkpoint]):
        per_server = []
        for server in servers:
            s = _find(mem, server, key, metric, checkpoint)
            per_server.append(summarize(s.samples) if s else None)
        add_row(_row_key(key), _title(data, data.series, key), checkpoint, per_server)
    caption = MEMORY_CAPTIONS.get(metric, f"Values are {metric}")
    caption += f"; {checkpoint} of each workload, median of the repeats."
    return Table("memory", title, columns, rows, caption, records)


# -- campaign ---------------------------------------------------------------

#: Server CPU cost series (runner.cell.samples.efficiency_samples), per GiB before per operation.
COST_METRICS = ("server_cpu_per_gib", "server_cpu_per_op")

#: Relative disagreement of the process-tree cross-check with a cgroup CPU figure above
#: which the ``server CPU`` cell flags it (runner.cell.server_cpu.DISAGREEMENT).
CPU_DISAGREEMENT = 0.10


#: The series of the load generator's run-queue wait / wall time (runner.metrics.runqueue).
RUNQUEUE_METRIC = "client_cpu_runqueue_wait"
#: The series of the steal share of the load generator's CPUs (runner.metrics.runqueue).
STEAL_METRIC = "client_cpu_steal"


def server_cpu_cell(text: str, sources: Sequence[str], tree_diffs: Sequence[float]) -> Cell:
    """The ``server CPU`` cell of a row: ``text`` (the median figure), then where the
    figures came from, ``[cgroup]`` (over the measured span), ``[cgroup, whole phase]``,
    ``[process tree]`` or several (``cell.server_cpu_source``, ``cgroup:phase``;
    nothing when unknown), and, when the process-tree cross-check of a cgroup figure
    disagrees by more than :data:`CPU_DISAGREEMENT` in any cell of the row, how much and in
    how many cells, e.g. ``"0.410 s/GiB [cgroup; tree -99% in 2 of 2]"``, marked ``loss``.
    ``tree_diffs``: the cells' ``(tree - cgroup) / cgroup`` ratios."""
    names = [{"cgroup": "cgroup", "cgroup:phase": "cgroup, whole phase", "tree": "process tree"}.get(x, x)
             for x in dict.fromkeys(sources)]
    notes = ["+".join(names)] if names else []
    off = [d for d in tree_diffs if abs(d) > CPU_DISAGREEMENT]
    if off:
        worst = max(off, key=abs)
        notes.append(f"tree {worst * 100:+.0f}% in {len(off)} of {len(tree_diffs)}")
    return Cell(text + (f" [{'; '.join(notes)}]" if notes else ""), "loss" if off else "")


def fairness_text(jain: float | None) -> str:
    """The fairness column's text: Jain's index with two decimals, ``"0.98"``; ``"n/a"``
    for a row without one (single-session workloads)."""
    return fmt.NA if jain is None else f"{jain:.2f}"


def client_cpu_cell(busy: float | None, wait: float | None = None, steal: float | None = None) -> Cell:
    """The ``client CPU`` cell: the load generator's CPU share of one core ``busy``
    (``"52%"``), then, when recorded, its run-queue wait share ``wait`` (``"52% +47%
    wait"``: runnable but kept off its CPU, runner.metrics.runqueue), the steal share of
    its CPUs ``steal`` when it rounds to 1% or more (``"45% +47% wait, 10% stolen"``), and
    ``client-bound`` (marked ``loss``) when runner.metrics.runqueue.saturation of the
    three (``busy / (1 - steal) + wait``) reaches runner.metrics.runqueue.CLIENT_BOUND
    (runner.metrics.runqueue.client_bound). ``n/a`` when
    ``busy`` is None (not recorded)."""
    if busy is None:
        return Cell(fmt.NA)
    text = f"{busy * 100:.0f}%" + (f" +{wait * 100:.0f}% wait" if wait is not None else "")
    if steal_shown(steal):
        text += f", {steal * 100:.0f}% stolen"
    return Cell(text + " client-bound", "loss") if client_bound(busy, wait, steal) else Cell(text)


def campaign_table(data: CampaignData, *, title: str | None = None) -> Table:
    """Every workload of every server (spec order, then catalogue order): the
    primary metric's median, CI of the median, number of repeats, errors.

    Columns: ``server``, ``title`` ("benchmark type"), ``median`` (``"1652.72
    MiB/s"``), ``ci`` (``"[1600.12, 1700.34] MiB/s"``, ``n/a`` for n < 2), ``n``,
    ``errors`` (failed operations summed over the repeats, from the ``errors`` or
    ``errors_total`` series; ``n/a`` when not recorded) and ``failed`` (failed or skipped cells in
    ``data.failures``), ``client_cpu`` (median load-generator CPU seconds per wall
    second, from the ``client_cpu_utilization`` series, with the median run-queue wait per
    wall second of ``client_cpu_runqueue_wait`` and the median steal share of
    ``client_cpu_steal`` when recorded; at 90% or more together marked ``client-bound``,
    a loss: :func:`client_cpu_cell`) and, when the campaign stored them, ``server_cpu``: the
    server's CPU cost of the work, median of ``server_cpu_per_op`` (``"41.20 us/op"``,
    logins and QUITs) or ``server_cpu_per_gib`` (``"0.210 s/GiB"``, transfers), with its
    source and any disagreement of its cross-check (:func:`server_cpu_cell`) and, when
    the campaign has N-client cells, ``fairness`` (header ``Jain``): the median of Jain's
    index over the clients (``"0.98"``; ``n/a`` for single-session rows; docs/methodology.md,
    "Fairness").
    A workload whose every cell failed still gets a row (median ``n/a``), so a skipped
    server is never silently missing.

    Records: per row ``server, workload, params_key, title, metric, unit``, the
    summary fields, ``errors``, ``failed``, ``client_cpu_utilization`` (and
    ``client_cpu_runqueue_wait`` and ``client_cpu_steal`` when the campaign recorded them); with the optional
    columns ``server_cpu``, ``server_cpu_unit``, ``server_cpu_source`` (``cgroup``, ``tree``,
    ``cgroup+tree``; None when unknown), ``server_cpu_tree_diff`` (the cells' ratios, or
    None), ``fairness_jain`` and ``fairness_cv``
    (medians of the ``fairness_jain`` and ``fairness_cv`` series, None without them).
    """
    columns: tuple[Column, ...] = (
        Column("server", "server"), Column("title", "benchmark type"),
        Column("median", "median", True), Column("ci", "95% CI", True),
        Column("n", "n", True), Column("errors", "errors", True),
        Column("failed", "failed", True), Column("client_cpu", "client CPU", True))
    cost = any(s.metric in COST_METRICS for s in data.series)
    if cost:
        columns += (Column("server_cpu", "server CPU", True),)
    fair = any(s.metric == FAIRNESS_METRIC for s in data.series)
    if fair:
        columns += (Column("fairness", "Jain", True),)  # narrow: the header is the index's name
    runqueue = any(s.metric == RUNQUEUE_METRIC for s in data.series)
    stolen = any(s.metric == STEAL_METRIC for s in data.series)
    rows: list[Row] = []
    records: list[dict] = []
    keys = _ordered_keys(data, data.series)
    known = {k[0] for k in keys}
    for f in data.failures:
        if f[1] not in known:
            keys.append((f[1], ""))
            known.add(f[1])
    for server in data.servers:
        for key in keys:
            m = _primary_metric(data, key[0], data.series)
            s = _find(data.series, server, key, m) if m else None
            failed = sum(1 for f in data.failures if f[0] == server and f[1] == key[0])
            if s is None and not failed:
                continue
            err = (_find(data.series, server, key, "errors")
                   or _find(data.series, server, key, "errors_total"))
            errors = int(sum(err.samples)) if err else None
            util = _find(data.series, server, key, "client_cpu_utilization")
            busy = summarize(util.samples).median if util else None
            rq = _find(data.series, server, key, RUNQUEUE_METRIC)
            wait = summarize(rq.samples).median if rq else None
            st = _find(data.series, server, key, STEAL_METRIC)
            steal = summarize(st.samples).median if st else None
            summ = summarize(s.samples) if s else None
            unit = s.unit if s else ""
            cells: tuple[Cell, ...] = (Cell(server), Cell(_title(data, data.series, key)),
                     Cell(fmt.value(summ.median, unit) if summ else fmt.NA),
                     Cell(fmt.ci_bounds(summ, unit) if summ else fmt.NA),
                     Cell(str(summ.n) if summ else "0"),
                     Cell(str(errors) if errors is not None else fmt.NA),
                     Cell(str(failed)),
                     client_cpu_cell(busy, wait, steal))
            record_extra: dict = ({"client_cpu_runqueue_wait": wait} if runqueue else {}) | (
                {"client_cpu_steal": steal} if stolen else {})
            if cost:
                c = next((x for x in (_find(data.series, server, key, m) for m in COST_METRICS) if x), None)
                med = summarize(c.samples).median if c else None
                diff = _find(data.series, server, key, "server_cpu_tree_diff")
                sources = data.cpu_sources.get((server, key[0], key[1]), ())
                cells += (server_cpu_cell(fmt.value(med, c.unit) if c and med is not None else fmt.NA,
                                          sources, diff.samples if diff else ()),)
                record_extra |= {"server_cpu": med, "server_cpu_unit": c.unit if c else None,
                                "server_cpu_source": "+".join(dict.fromkeys(sources)) or None,
                                "server_cpu_tree_diff": list(diff.samples) if diff else None}
            if fair:
                jain, cv = (_find(data.series, server, key, m) for m in (FAIRNESS_METRIC, "fairness_cv"))
                j = summarize(jain.samples).median if jain else None
                cells += (Cell(fairness_text(j)),)
                record_extra |= {"fairness_jain": j, "fairness_cv": summarize(cv.samples).median if cv else None}
            rows.append(Row(f"{server}:{_row_key(key)}", cells, None, unit))
            records.append({"server": server, "workload": key[0], "params_key": key[1],
                            "title": cells[1].text, "metric": m, "unit": unit,
                            **_summary_record("", summ), "errors": errors, "failed": failed,
                            "client_cpu_utilization": busy, **record_extra})
    return Table("campaign", title or f"Campaign {data.name}", columns, rows, "", records)


def report_tables(data: CampaignData, *, reference: str | None = None, ci: bool = True,
                  speedup: bool = False, alpha: float = ALPHA) -> list[Table]:
    """The default report of a campaign: :func:`campaign_table`, one
    :func:`comparison_table` of ``reference`` (default: the first server) against
    each other server, and :func:`memory_table` when memory series exist."""
    tables = [campaign_table(data)]
    if data.servers:
        ref = reference or data.servers[0]
        _check_servers(data, [ref])
        tables += [comparison_table(data, ref, other, ci=ci, speedup=speedup, alpha=alpha)
                   for other in data.servers if other != ref]
    metrics = {s.metric for s in data.series}
    for m in MEMORY_METRICS:
        if m in metrics:
            tables.append(memory_table(data, metric=m))
            break
    return tables


def as_tables(obj: Table | Sequence[Table] | CampaignData) -> list[Table]:
    """Normalise an export's input: a Table, a sequence of Tables, or CampaignData
    (rendered as :func:`report_tables`). Raises TypeError for anything else."""
    if isinstance(obj, Table):
        return [obj]
    if isinstance(obj, CampaignData):
        return report_tables(obj)
    if isinstance(obj, Sequence) and all(isinstance(t, Table) for t in obj):
        return list(obj)
    raise TypeError(f"expected a Table, a sequence of Tables or CampaignData, got {type(obj).__name__}")
