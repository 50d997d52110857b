"""The read subcommands: ``campaigns``, ``show``, ``compare``, ``export``; and ``cancel``."""
from __future__ import annotations

import argparse

from runner.cli import common
from runner.cli.campaign import _print_failures
from runner.cli.common import CliError


def cmd_campaigns(args: argparse.Namespace) -> int:
    from rich.table import Table
    from sqlalchemy import select

    from runner.store import campaigns as crud
    from runner.store.models import Campaign

    console = common.console()
    engine = common.engine()
    with common.session(engine) as session:
        crud.reap_dead_workers(session)
        rows = session.scalars(select(Campaign).order_by(Campaign.id.desc()).limit(args.limit)).all()
        t = Table("id", "name", "status", "backend", "cells", "done", "failed", "skipped", "created (UTC)")
        for c in rows:
            t.add_row(str(c.id), c.name, c.status, c.backend, str(c.cells_total), str(c.cells_done),
                      str(c.cells_failed), str(c.cells_skipped), c.created_at.strftime("%Y-%m-%d %H:%M:%S"))
    if not rows:
        console.print("no campaigns yet: `xferlab run --preset classic`")
    else:
        console.print(t)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from runner.report import render as reporting
    from runner.report.reader import load_campaign

    console = common.console()
    engine = common.engine()
    with common.session(engine) as session:
        camp = common.get_campaign(session, args.id)
        data = load_campaign(session, campaign_id=args.id)
        console.print(f"campaign {camp.id} '{camp.name}': {camp.status}, backend {camp.backend}, "
                      f"{camp.cells_done}/{camp.cells_total} done, {camp.cells_failed} failed, "
                      f"{camp.cells_skipped} skipped; lab {camp.lab_version}")
    if getattr(args, "timing", False):
        _print_timing(console, args.id)
        return 0
    _print_failures(console, data)
    common.emit(reporting.campaign_report(data, fmt=args.format or "text"), None)
    return 0


def _print_timing(console, campaign_id: int) -> None:
    """``show ID --timing``: the campaign's time per cell stage (runner.report.reader.campaign_timing)."""
    from rich.table import Table

    from runner.catalogue.stages import STAGES
    from runner.report.reader import campaign_timing

    with common.session(common.engine()) as session:
        t = campaign_timing(session, campaign_id=campaign_id)
    if not t["stages"]:
        console.print(f"campaign {campaign_id}: no cell timing recorded (cells run before timing was recorded, "
                      "or none ran yet)")
        return
    cells_s = t["cells_s"] or 0.0
    table = Table("stage", "what", "cells", "median s", "total s", "share of cell time",
                  title=f"Where the time of campaign {campaign_id} went ({t['cells']} cells)")
    for row in t["stages"]:
        share = f"{row['total_s'] / cells_s * 100:.1f}%" if cells_s else "n/a"
        table.add_row(row["stage"], STAGES[row["stage"]].strip(), str(row["cells"]), f"{row['median_s']:.3f}",
                      f"{row['total_s']:.1f}", share)
    console.print(table)
    # "store" happens after a cell's finished_at; "of which" rows are inside another stage
    inside = sum(r["total_s"] for r in t["stages"] if r["stage"] != "store" and not STAGES[r["stage"]].startswith("  "))
    store = sum(r["total_s"] for r in t["stages"] if r["stage"] == "store")
    console.print(f"cells: {cells_s:.1f} s from claim to finish, {inside:.1f} s of it in the stages above; "
                  f"other (claiming, environment and build records): {max(0.0, cells_s - inside):.1f} s; "
                  f"then {store:.1f} s storing")
    if t["campaign_s"] is not None:
        console.print(f"campaign: {t['campaign_s']:.1f} s wall; outside cells and their storing: "
                      f"{max(0.0, t['campaign_s'] - cells_s - store):.1f} s")
        measured = sum(r["total_s"] for r in t["stages"] if r["stage"] == "measured")
        prepare = sum(r["total_s"] for r in t["stages"] if r["stage"] == "prepare")
        if t["campaign_s"] > 0:
            share = measured / t["campaign_s"] * 100
            line = f"measured span: {measured:.1f} s, {share:.1f}% of the campaign's wall time"
            if prepare and t["campaign_s"] > prepare:
                line += (f"; {measured / (t['campaign_s'] - prepare) * 100:.1f}% of it without the "
                         f"{prepare:.1f} s of preparation (images built)")
            console.print(line)
    shown = [k for k in STAGES if any(k in srv["stages"] for srv in t["servers"])]
    per = Table(title="Per server (seconds summed over its cells; 'of which' stages are inside the one above)")
    # the server's label whole on one line: the stage headers give way (they wrap) when the table is wide
    per.add_column("server", no_wrap=True, min_width=max((len(srv["server"]) for srv in t["servers"]), default=6))
    for name in ("cells", *shown, "sum"):  # seconds, as the title says
        per.add_column(name, justify="right")
    for srv in t["servers"]:
        st = srv["stages"]
        total = sum(v for k, v in st.items() if not STAGES[k].startswith("  "))
        per.add_row(srv["server"], str(srv["cells"]), *(f"{st[k]:.1f}" if k in st else "" for k in shown),
                    f"{total:.1f}")
    console.print(per)


def cmd_compare(args: argparse.Namespace) -> int:
    from runner.report import render as reporting

    engine = common.engine()
    with common.session(engine) as session:
        try:
            out = reporting.compare_report(session, args.a, args.b, campaign=args.campaign,
                                           fmt=args.format or "text", speedup=args.speedup)
        except reporting.CompareError as exc:
            raise CliError(str(exc)) from None
    common.emit(out, args.output)
    if getattr(args, "profile", False):
        from runner.cli.profile import write_compare_profiles

        write_compare_profiles(args)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from runner.report import render as reporting
    from runner.report.reader import load_campaign

    engine = common.engine()
    with common.session(engine) as session:
        common.get_campaign(session, args.id)
        data = load_campaign(session, campaign_id=args.id)
    common.emit(reporting.campaign_report(data, fmt=args.format, speedup=args.speedup), args.output)
    return 0



def cmd_cancel(args: argparse.Namespace) -> int:
    from runner.store import campaigns as crud

    engine = common.engine()
    with common.session(engine) as session:
        try:
            camp = crud.cancel_campaign(session, campaign_id=args.id)
        except (LookupError, ValueError) as exc:
            raise CliError(str(exc)) from None
    print(f"campaign {camp.id} cancelled")
    return 0

