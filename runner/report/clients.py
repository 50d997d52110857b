"""The real-client tables of seeds 003 and 004: for every workload a campaign ran with a
real-client driver (lftp, wget, curl: runner.load.tools.ftp_tool), one row per server and
parameter set with what ``time`` printed for the clients in seed 003 and what seed 004
compared: the primary figure (total time of the N downloads, or throughput), its ratio
to the best row of the same benchmark, the per-client spread (Jain's index; per-client
MiB/s min, median, max), the clients' CPU (user and system seconds, share of a core,
client-bound flag), their peak resident set and minor page faults.

A row of the same workload run by xferlab's own driver (seed 004: ``xferlab-ftp``
beside ``wget``) is in the table too, with ``n/a`` where the figure is a real client's
only (its rusage). Every figure is the median over the repeats, except the peak
resident set: the largest of any client in any repeat.
"""
from __future__ import annotations

import statistics

from runner.report import fmt
from runner.report.data import CampaignData, Series
from runner.report.model import Cell, Column, Row, Table
from runner.report.tables import RUNQUEUE_METRIC, STEAL_METRIC, client_cpu_cell

#: The series that marks a real-client cell: peak resident set of its client processes
#: (runner.cell.samples.process_samples; absent for xferlab's own drivers).
MARKER = "client_max_rss_max"


def _median(s: Series | None) -> float | None:
    return statistics.median(s.samples) if s is not None and s.samples else None


def client_tables(data: CampaignData) -> list[Table]:
    """One :func:`client_table` per benchmark (workload and parameter set) of a workload
    that has at least one real-client cell (a :data:`MARKER` series), in the campaign's
    series order; [] when the campaign has none."""
    workloads = {s.workload for s in data.series if s.metric == MARKER}
    keys = list(dict.fromkeys((s.workload, s.params_key) for s in data.series if s.workload in workloads))
    return [client_table(data, w, k) for w, k in keys
            if any(s.workload == w and s.params_key == k and s.metric == _primary(data, w) for s in data.series)]


def _primary(data: CampaignData, workload: str) -> str:
    facts = data.workloads.get(workload)
    return facts.primary if facts else "elapsed"


def client_table(data: CampaignData, workload: str, params_key: str) -> Table:
    """The real-client table of one benchmark (kind ``"clients"``): ``workload`` with the
    parameters of ``params_key`` (their driver and client options included), titled
    with the benchmark's row title.

    Rows: every server with the benchmark's primary figure, in the campaign's server
    order, and every server without it whose cells of ``workload`` failed or were skipped
    (``n/a`` figures, the first reason in a last column ``note``). Columns: ``server``,
    ``median`` (primary metric, median of ``n`` repeats), ``vs_best`` (the row's figure
    over the best row's: a time over the shortest, a throughput over the highest, so
    ``"1.00x"`` marks the best), ``jain`` (Jain's index of the per-client rates),
    ``rate_min``, ``rate_p50``, ``rate_max`` (per-client MiB/s), ``cpu_user``, ``cpu_sys``
    (CPU seconds of all client processes), ``client_cpu`` (their share of one core,
    with the run-queue wait share when recorded; ``client-bound`` at 90%:
    runner.report.tables.client_cpu_cell), ``max_rss`` (the largest peak resident set of one client in
    any repeat), ``minflt`` (minor page faults, all clients).

    Records (CSV/JSON): per row ``server, workload, params_key, title, metric, unit`` and
    the column keys, raw (seconds, MiB/s, bytes, counts; None when not recorded)."""
    facts = data.workloads.get(workload)
    primary = _primary(data, workload)
    hib = facts.higher_is_better if facts else False
    index: dict[tuple[str, str], Series] = {
        (s.server, s.metric): s for s in data.series if s.workload == workload and s.params_key == params_key}
    # a server without the figure keeps its row when a cell of the workload failed or was
    # skipped (the first reason as its note), so a server that could not do it is not missing
    notes = {}
    for server, wl, _, reason in data.failures:
        if wl == workload and (server, primary) not in index and server not in notes:
            notes[server] = reason.removeprefix("skipped: ")[:160]
    servers = [x for x in data.servers if (x, primary) in index or x in notes]
    title = next((s.title for s in index.values()), facts.title if facts else workload)
    unit = next((index[(x, primary)].unit for x in servers), facts.unit if facts else "")
    med = {x: _median(index.get((x, primary))) for x in servers}
    figures = [v for v in med.values() if v is not None and v > 0]
    best = (max(figures) if hib else min(figures)) if figures else None
    columns = (Column("server", "server"), Column("median", "median", True), Column("n", "n", True),
               Column("vs_best", "vs best", True), Column("jain", "Jain", True),
               Column("rate_min", "min MiB/s", True), Column("rate_p50", "p50", True), Column("rate_max", "max", True),
               Column("cpu_user", "user", True), Column("cpu_sys", "sys", True),
               Column("client_cpu", "client CPU", True), Column("max_rss", "max RSS", True),
               Column("minflt", "minflt", True)) + ((Column("note", "note"),) if notes else ())
    rows: list[Row] = []
    records: list[dict] = []
    for server in servers:
        def m(metric: str, _s: str = server) -> float | None:
            return _median(index.get((_s, metric)))
        value = med[server]
        ratio = value / best if value is not None and best else None
        rss_s = index.get((server, MARKER))
        rss = max(rss_s.samples) if rss_s is not None and rss_s.samples else None
        busy = m("client_cpu_utilization")
        n = len(index[(server, primary)].samples) if (server, primary) in index else 0
        jain, rmin, rp50, rmax = (m("fairness_jain"), m("fairness_min_rate"), m("fairness_p50_rate"),
                                  m("fairness_max_rate"))
        user, system, minflt = m("client_cpu_user"), m("client_cpu_system"), m("client_page_faults_minor")
        records.append({"server": server, "workload": workload, "params_key": params_key, "title": title,
                        "metric": primary, "unit": unit, "median": value, "n": n, "vs_best": ratio, "jain": jain,
                        "rate_min": rmin, "rate_p50": rp50, "rate_max": rmax, "cpu_user": user,
                        "cpu_sys": system, "client_cpu": busy, "max_rss": rss, "minflt": minflt,
                        **({"note": notes.get(server, "")} if notes else {})})

        def num(v: float | None, u: str = "") -> Cell:
            return Cell(fmt.NA if v is None else fmt.value(v, u) if u else fmt.number(v))
        cpu = client_cpu_cell(busy, m(RUNQUEUE_METRIC), m(STEAL_METRIC))
        rows.append(Row(f"{workload}[{params_key}]", (
            Cell(server), num(value, unit), Cell(str(n)),
            Cell(fmt.NA if ratio is None else f"{ratio:.2f}x", "win" if ratio == 1.0 else ""),
            Cell(fmt.NA if jain is None else f"{jain:.2f}"), num(rmin), num(rp50), num(rmax),
            num(user, "s"), num(system, "s"), cpu, Cell(fmt.NA if rss is None else fmt.bytes2human(rss)),
            Cell(fmt.NA if minflt is None else f"{minflt:,.0f}")) + ((Cell(notes.get(server, "")),) if notes else ()),
            unit=unit))
    caption = ("Median of the repeats; vs best: the row's figure over the best row's; min/p50/max MiB/s: each "
               "client's bytes over its own time from start to exit; user, sys: CPU seconds of all client "
               "processes; client CPU: their share of one core; max RSS: the largest of any client (wait4 rusage).")
    return Table("clients", f"Real clients: {title}", columns, rows, caption, records)
