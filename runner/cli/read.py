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
    from runner import reporting
    from runner.results import load_campaign

    console = common.console()
    engine = common.engine()
    with common.session(engine) as session:
        camp = common.get_campaign(session, args.id)
        data = load_campaign(session, campaign_id=args.id)
        console.print(f"campaign {camp.id} '{camp.name}': {camp.status}, backend {camp.backend}, "
                      f"{camp.cells_done}/{camp.cells_total} done, {camp.cells_failed} failed, "
                      f"{camp.cells_skipped} skipped; lab {camp.lab_version}")
    _print_failures(console, data)
    common.emit(reporting.campaign_report(data, fmt=args.format or "text"), None)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from runner import reporting

    engine = common.engine()
    with common.session(engine) as session:
        try:
            out = reporting.compare_report(session, args.a, args.b, campaign=args.campaign,
                                           fmt=args.format or "text", speedup=args.speedup)
        except reporting.CompareError as exc:
            raise CliError(str(exc)) from None
    common.emit(out, args.output)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from runner import reporting
    from runner.results import load_campaign

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

