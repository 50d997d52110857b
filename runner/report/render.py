"""Report glue shared by the CLI and the dashboard: campaign reports and comparisons
rendered in one of the export formats (the same bytes wherever they are asked for)."""
from __future__ import annotations

from dataclasses import replace

from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.report import FORMATS
from runner.report.data import CampaignData
from runner.report.reader import latest_campaign_id, load_campaign
from runner.store.models import Campaign, Cell


def chartjs_text() -> str | None:
    """The Chart.js build the HTML report inlines: the text of ``XFERLAB_CHARTJS_PATH``
    (default: Debian's libjs-chart.js ``chart.min.js``), None when it cannot be read."""
    from runner.config import get_settings

    try:
        return get_settings().chartjs_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def render_tables(tables, fmt: str, *, data: CampaignData | None = None, title: str | None = None,
                  width: int = 160, charts: dict | None = None) -> str:
    """Render report tables in ``fmt``. CSV and JSON of a whole campaign (``data`` given)
    carry every raw sample; HTML with ``charts`` (runner.report.charts.chart_data) is the
    self-contained report with its charts, Chart.js inlined (:func:`chartjs_text`).
    Raises ValueError for an unknown format."""
    from runner.report import csv, html, json, md, rst, text

    if fmt == "text":
        out = text.render(tables, width=width)
        for t in tables:
            if t.kind == "comparison" and t.oneliners():
                out += f"\n{t.title}:\n" + text.render_oneliners(t)
        return out
    if fmt == "rst":
        return rst.render(tables)
    if fmt == "md":
        return md.render(tables)
    if fmt == "html":
        return html.render(tables, doc_title=title, charts=charts,
                           chartjs=chartjs_text() if charts is not None else None)
    if fmt == "csv":
        return csv.render(data if data is not None else tables)
    if fmt == "json":
        return json.render(data if data is not None else tables)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def campaign_report(data: CampaignData, *, fmt: str = "text", speedup: bool = False,
                    reference: str | None = None) -> str:
    """A campaign's report: per-server table (with the knee line of each sustained sweep,
    whose saturation table follows it: runner.report.saturation; in text, their summary at
    the end; the sustainable users of each capacity search in its caption, then the capacity
    tables: runner.report.capacity), each server against ``reference`` (default
    the first server), memory table, seed 002's upload table when the campaign has
    ``http_upload`` cells (runner.report.uploads), the real-client tables of seeds 003
    and 004 when it has real-client cells (runner.report.clients), the per-operation and per-bucket
    tables of the mixed cells (runner.report.mixed), the kernel TCP counters of every cell where
    one was non-zero (runner.report.tcp), the profiled cells' profiler, version, rate and
    on/off-CPU split (runner.report.profiles); rendered in ``fmt``.
    In HTML, with the charts of runner.report.charts (per benchmark, the comparison with
    ``reference``, memory over time, fairness, saturation). Raises ValueError for an
    unknown format or ``reference``."""
    from runner.report.capacity import capacity_tables, headline
    from runner.report.charts import chart_data
    from runner.report.clients import client_tables
    from runner.report.context import context_table, setup_table
    from runner.report.mixed import mixed_tables
    from runner.report.profiles import profile_table
    from runner.report.saturation import curves, knee_text, saturation_table, summary_lines
    from runner.report.tables import report_tables
    from runner.report.tcp import tcp_table
    from runner.report.uploads import upload_tables

    tables = report_tables(data, reference=reference, ci=True, speedup=speedup)
    sweeps = curves(data)  # sustained sweeps: the knee line over the campaign table, a saturation table each
    for t in tables:
        if t.kind == "campaign" and sweeps:
            t.caption = "Saturation knee: " + "; ".join(knee_text(c) for c in sweeps) + "."
    for t in tables:
        if t.kind == "campaign" and data.capacity:
            t.caption = ((t.caption + " " if t.caption else "") + "Sustainable users: "
                         + "; ".join(headline(r) for r in data.capacity) + ".")
    tables += capacity_tables(data)  # the headline per server, then each search's steps
    tables += [saturation_table(c) for c in sweeps]
    tables += upload_tables(data)  # seed 002's disk/tmpfs table of an HTTP upload campaign
    tables += client_tables(data)  # seeds 003/004: real client processes, their spread, CPU and memory
    tables += mixed_tables(data)  # the mixed workload: per operation kind and per size bucket
    tables += [t for t in (tcp_table(data),) if t is not None]  # listen overflows beside the late sessions
    tables += [t for t in (profile_table(data),) if t is not None]  # profiler, version, rate of profiled cells
    tables += [t for t in (context_table(data.environment, data.setups), setup_table(data.servers, data.setups))
               if t is not None]
    out = render_tables(tables, fmt, data=data, title=f"xferlab campaign {data.campaign_id}: {data.name}",
                        charts=chart_data(data, reference=reference) if fmt == "html" else None)
    if fmt == "text" and sweeps:
        out += "\nSaturation:\n" + "\n".join(line for c in sweeps for line in summary_lines(c)) + "\n"
    return out


class CompareError(LookupError):
    """A compare operand cannot be resolved (message names it and what exists)."""


def _resolve(session: Session, operand: str, campaign: int | None) -> tuple[int, str]:
    """``ID`` | ``ID:SERVER`` | ``SERVER`` → (campaign id, server label)."""
    cid: int | None
    label: str | None
    head, sep, tail = operand.partition(":")
    if head.isdigit() and sep:
        cid, label = int(head), tail
    elif operand.isdigit():
        cid, label = int(operand), None
    else:
        cid, label = campaign, operand
        if cid is None:
            cid = session.scalar(select(Cell.campaign_id).where(Cell.server_label == label, Cell.status == "done")
                                 .order_by(Cell.campaign_id.desc()).limit(1))
            if cid is None:
                cid = latest_campaign_id(session)
    if cid is None or session.get(Campaign, cid) is None:
        raise CompareError(f"{operand!r}: no such campaign" + (f" {cid}" if cid else "") + " (see `xferlab campaigns`)")
    labels = list(dict.fromkeys(session.scalars(select(Cell.server_label).where(Cell.campaign_id == cid)
                                                .order_by(Cell.seq))))
    if label is None:
        if len(labels) != 1:
            raise CompareError(f"{operand!r}: campaign {cid} has {len(labels)} servers ({', '.join(labels)}); "
                               f"say which, as {cid}:SERVER")
        label = labels[0]
    if label not in labels:
        raise CompareError(f"{operand!r}: campaign {cid} has no server {label!r}; it has: {', '.join(labels)}")
    return cid, label


def resolve_operand(session: Session, operand: str, *, campaign: int | None = None) -> tuple[int, str]:
    """Resolve one compare operand (``ID`` | ``ID:SERVER`` | ``SERVER``, as ``xferlab
    compare``) to ``(campaign id, server label)``. Raises CompareError."""
    return _resolve(session, operand, campaign)


def comparison_data(session: Session, a: str, b: str, *, campaign: int | None = None
                    ) -> tuple[CampaignData, str, str, list[str]]:
    """Resolve two operands (see ``xferlab compare --help``) into one CampaignData holding
    both servers' series, their labels, and warnings (e.g. different environment classes).
    Servers from two campaigns with the same label are told apart as ``label (#ID)``."""
    (ca, la), (cb, lb) = _resolve(session, a, campaign), _resolve(session, b, campaign)
    warnings: list[str] = []
    if ca == cb:
        if la == lb:
            raise CompareError(f"{a!r} and {b!r} are the same server of the same campaign")
        data = load_campaign(session, campaign_id=ca)
        sub = [s for s in data.series if s.server in (la, lb)]
        return replace(data, servers=[la, lb], series=sub,
                       failures=[f for f in data.failures if f[0] in (la, lb)],
                       timelines=[t for t in data.timelines if t.server in (la, lb)],
                       client_curves=[c for c in data.client_curves if c.server in (la, lb)],
                       capacity=[c for c in data.capacity if c.server in (la, lb)]), la, lb, warnings
    da, db = load_campaign(session, campaign_id=ca), load_campaign(session, campaign_id=cb)
    na, nb = (f"{la} (#{ca})", f"{lb} (#{cb})") if la == lb else (la, lb)
    series = [replace(s, server=na) for s in da.series if s.server == la]
    series += [replace(s, server=nb) for s in db.series if s.server == lb]
    if da.environment.get("env_class") != db.environment.get("env_class"):
        warnings.append(f"environments differ (campaign {ca}: {da.environment.get('env_class')}, campaign {cb}: "
                        f"{db.environment.get('env_class')}): kernel, CPU, sysctls or backend changed")
    from runner.catalogue.workloads import WORKLOADS

    order = {w: i for i, w in enumerate(WORKLOADS)}
    facts = {**db.workloads, **da.workloads}
    data = CampaignData(campaign_id=cb, name=f"{da.name} vs {db.name}", servers=[na, nb], series=series,
                        environment=db.environment, environments={na: da.environment, nb: db.environment},
                        setups={na: da.setups.get(la, {}), nb: db.setups.get(lb, {})},
                        failures=[(na, *f[1:]) for f in da.failures if f[0] == la]
                        + [(nb, *f[1:]) for f in db.failures if f[0] == lb],
                        workloads={w: facts[w] for w in sorted(facts, key=lambda w: order.get(w, len(order)))},
                        timelines=[replace(t, server=na) for t in da.timelines if t.server == la]
                        + [replace(t, server=nb) for t in db.timelines if t.server == lb],
                        client_curves=[replace(c, server=na) for c in da.client_curves if c.server == la]
                        + [replace(c, server=nb) for c in db.client_curves if c.server == lb],
                        capacity=[replace(c, server=na) for c in da.capacity if c.server == la]
                        + [replace(c, server=nb) for c in db.capacity if c.server == lb])
    return data, na, nb, warnings


def compare_report(session: Session, a: str, b: str, *, campaign: int | None = None, fmt: str = "text",
                   speedup: bool = False) -> str:
    """The comparison table of ``a`` (reference) and ``b`` in ``fmt``, then (except in
    CSV, one table per file) the same comparison of their server CPU per unit of work
    (s/GiB or us/op, when both have it), their fairness over the clients of N-client
    cells (Jain's index, when both have it), their sustainable users (runner.report.capacity,
    when both ran the same capacity search), the two servers' setups and, for servers of two
    campaigns, every difference between the campaigns' environments. Raises CompareError."""
    from runner.report.capacity import capacity_comparison
    from runner.report.context import environment_diff_table, setup_table
    from runner.report.tables import COST_METRICS, comparison_table, fairness_comparison

    data, la, lb, warnings = comparison_data(session, a, b, campaign=campaign)
    tables = [comparison_table(data, la, lb, ci=True, speedup=speedup)]
    if fmt != "csv" and all(any(s.server == x and s.metric in COST_METRICS for s in data.series) for x in (la, lb)):
        # what each server spent for the work (valid when the client was the bottleneck)
        tables.append(comparison_table(data, la, lb, ci=True, speedup=speedup, metric=COST_METRICS,
                                       title=f"Server CPU per unit of work: {la} vs. {lb}"))
    fair = fairness_comparison(data, la, lb, speedup=speedup) if fmt != "csv" else None
    if fair is not None:  # how evenly each shared itself between its clients
        tables.append(fair)
    cap = capacity_comparison(data, la, lb) if fmt != "csv" else None
    if cap is not None:  # sustainable users at the same service level
        tables.append(cap)
    diff = (environment_diff_table(data.environments[la], data.environments[lb], la, lb)
            if data.environments else None)
    if fmt != "csv":  # one table per CSV file: the comparison alone
        tables += [t for t in (setup_table([la, lb], data.setups), diff) if t is not None]
    charts = None
    if fmt == "html":
        from runner.report.charts import chart_data

        charts = chart_data(data, reference=la)
    out = render_tables(tables, fmt, title=f"{la} vs. {lb}", charts=charts)
    if warnings and fmt == "text":
        out = "".join(f"warning: {w}\n" for w in warnings) + out
    return out

