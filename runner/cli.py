"""The ``xferlab`` command: subcommands with lazy heavy imports (pyperf ``__main__`` style).

    xferlab run [SPEC | --preset classic] [overrides]   run a campaign, print its tables
    xferlab resume ID                                   finish an interrupted campaign
    xferlab campaigns                                   list campaigns
    xferlab show ID                                     one campaign's figures and failures
    xferlab compare A B [--format F]                    compare two servers or campaigns
    xferlab export ID --format F                        export a campaign
    xferlab cancel ID                                   cancel a queued or running campaign
    xferlab servers [--fetch NAME]                      what can run here, and why not
    xferlab selftest                                    load-generator speed vs a plain socket reader
    xferlab worker                                      run queued campaigns (for the dashboard)
    xferlab images bootstrap|build|list                 container images, built offline (docker backend)
    xferlab dashboard                                   serve the web dashboard
    xferlab loadgen --host H --port P ... --start-at T   one load phase from this host, as JSON (multi-host)
    xferlab serve --server JSON --bind ADDR             one server on this host, driven over stdin (multi-host)
    xferlab db                                          where the database is; migrate it
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

FORMATS = ("rst", "html", "md", "csv", "json", "text")


class CliError(Exception):
    """A user error: printed as ``xferlab: error: ...`` with exit status 2."""


def _console():
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:  # piped or captured: do not squeeze tables into 80 columns
        console = Console(highlight=False, width=160)
    return console


def _engine():
    from runner.store.db import get_engine

    return get_engine()


def _session(engine):
    from sqlalchemy.orm import Session

    return Session(engine, expire_on_commit=False)


# ----------------------------------------------------------------------------- run


def _build_spec(args: argparse.Namespace):
    from runner.spec import load_spec, parse_spec

    if args.spec and args.preset:
        raise CliError("give a SPEC file or --preset, not both")
    if args.spec:
        spec = load_spec(args.spec)
    else:
        import yaml

        preset = args.preset or "classic"
        path = Path(__file__).parent / "presets" / f"{preset}.yaml"
        if not path.exists():
            known = sorted(p.stem for p in path.parent.glob("*.yaml"))
            raise CliError(f"unknown preset {preset!r}; known: {', '.join(known)}")
        data = yaml.safe_load(path.read_text())
        if len(os.sched_getaffinity(0)) >= 2:
            cpus = sorted(os.sched_getaffinity(0))
            data.setdefault("pinning", {"server": [cpus[0]], "client": [cpus[1]]})
        spec = parse_spec(data, f"preset {preset}")
    data: dict[str, Any] = spec.model_dump(mode="json")
    if args.repeats is not None:
        data["repeats"] = args.repeats
    if args.backend:
        data["backend"] = args.backend
    if args.name:
        data["name"] = args.name
    if args.servers:
        data["servers"] = [_parse_server(s) for s in args.servers.split(",") if s.strip()]
    if args.workloads:
        params = data["workloads"][0].get("params", {}) if data["workloads"] else {}
        data["workloads"] = [{"name": w.strip(), "params": params} for w in args.workloads.split(",") if w.strip()]
    overrides = {k: v for k, v in (("clients", args.clients), ("file_size", args.file_size),
                                   ("duration", args.duration), ("transfer_size", args.transfer_size),
                                   ("login_mode", args.login_mode), ("passive", args.passive)) if v is not None}
    if overrides:
        for w in data["workloads"]:
            w.setdefault("params", {}).update(overrides)
    if args.storage:
        data["storage"] = [k.strip() for k in args.storage.split(",") if k.strip()]
    if args.no_pin:
        data["pinning"] = {}
    if getattr(args, "inventory", None):
        data["hosts"] = {**(data.get("hosts") or {}), "inventory": args.inventory}
    return parse_spec(data, args.spec or f"preset {args.preset or 'classic'} with command-line options")


def _parse_server(text: str) -> dict[str, Any]:
    """``pyftpdlib``, ``pyftpdlib:2.2.0`` or ``pyftpdlib:2.2.0:use_sendfile=false``."""
    parts = text.strip().split(":")
    d: dict[str, Any] = {"name": parts[0]}
    if len(parts) > 1 and parts[1]:
        d["version"] = parts[1]
    if len(parts) > 2:
        from runner.backends.variants import parse_variant_text

        try:
            variant = parse_variant_text(parts[2])
        except ValueError as e:
            raise CliError(f"--servers {text!r}: variant options: {e}") from None
        d["variant"] = variant
    return d


class RichReporter:
    """Progress bar per campaign with the cell now running and the last cell's figures."""

    def __init__(self, console, total: int, done: int = 0):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        self.console = console
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                                 console=console, transient=False)
        self.task = self.progress.add_task("cells", total=total, completed=done)

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.progress.stop()

    def cell_started(self, cell, index: int, total: int) -> None:
        self.progress.update(self.task, description=f"{cell.server_label} · {cell.workload} · #{cell.repeat + 1}")

    def cell_finished(self, cell, status: str, summary: str) -> None:
        style = {"done": "green", "failed": "red", "skipped": "yellow"}.get(status, "white")
        self.progress.console.print(f"  [{style}]{status:>7}[/] {cell.server_label:<28} {cell.workload:<16} "
                                    f"#{cell.repeat + 1}  {summary}", markup=True, highlight=False)
        self.progress.advance(self.task)

    def message(self, text: str) -> None:
        self.progress.update(self.task, description=text[:80])


def cmd_run(args: argparse.Namespace) -> int:
    from runner.execute import resolve_backend, run_campaign
    from runner.store import campaigns as crud

    console = _console()
    spec = _build_spec(args)
    backend = resolve_backend(spec.backend)
    engine = _engine()
    with _session(engine) as session:
        crud.reap_dead_workers(session)
        camp = crud.create_campaign(session, spec=spec, backend=backend.name, owner=crud.worker_id())
        session.commit()
        cid, total = camp.id, camp.cells_total
    console.print(f"campaign [bold]{cid}[/] '{spec.name}': {total} cells "
                  f"({len(spec.servers)} servers, backend {backend.name}, {spec.repeats} repeats)")
    _run_with_progress(console, engine, cid, total, 0)
    return _print_results(console, engine, cid, args)


def _run_with_progress(console, engine, cid: int, total: int, done: int) -> None:
    from runner.execute import run_campaign

    with RichReporter(console, total, done) as rep:
        try:
            run_campaign(engine, cid, reporter=rep)
        except KeyboardInterrupt:
            from runner.store import campaigns as crud

            with _session(engine) as session:
                crud.cancel_campaign(session, campaign_id=cid)
            console.print(f"[red]interrupted[/]: campaign {cid} cancelled; finished cells are stored")
            raise SystemExit(130) from None


def _print_results(console, engine, cid: int, args) -> int:
    from runner.results import load_campaign

    with _session(engine) as session:
        data = load_campaign(session, campaign_id=cid)
        camp = _get_campaign(session, cid)
    console.print(f"\ncampaign {cid}: {camp.status}: {camp.cells_done} done, {camp.cells_failed} failed, "
                  f"{camp.cells_skipped} skipped of {camp.cells_total}")
    _print_failures(console, data)
    from runner import reporting

    _emit(reporting.campaign_report(data, fmt=getattr(args, "format", None) or "text"), None)
    return 0 if camp.status == "done" else 1


def _print_failures(console, data) -> None:
    seen = set()
    for server, workload, _rep, err in data.failures:
        first = (err or "").splitlines()[0] if err else ""
        key = (server, first if first.startswith("skipped") else (workload, first))
        if key in seen:
            continue
        seen.add(key)
        console.print(f"  [yellow]{server}[/] {'' if first.startswith('skipped') else workload + ': '}{first}",
                      markup=True, highlight=False)


def _get_campaign(session, cid: int):
    from runner.store.models import Campaign

    camp = session.get(Campaign, cid)
    if camp is None:
        raise CliError(f"no campaign {cid} (see `xferlab campaigns`)")
    return camp


def cmd_resume(args: argparse.Namespace) -> int:
    from sqlalchemy import func, select

    from runner.store import campaigns as crud
    from runner.store.models import Cell

    console = _console()
    engine = _engine()
    with _session(engine) as session:
        crud.reap_dead_workers(session)
        camp = _get_campaign(session, args.id)
        if camp.status in ("done", "failed", "cancelled"):
            raise CliError(f"campaign {args.id} is {camp.status}; nothing to resume")
        queued = session.scalar(select(func.count()).where(Cell.campaign_id == camp.id, Cell.status == "queued"))
        camp.status = "running"
        camp.owner = crud.worker_id()
        session.commit()
        total, done = camp.cells_total, camp.cells_total - queued
    console.print(f"resuming campaign {args.id}: {queued} cells left")
    _run_with_progress(console, engine, args.id, total, done)
    return _print_results(console, engine, args.id, args)


# ----------------------------------------------------------------------------- read


def cmd_campaigns(args: argparse.Namespace) -> int:
    from rich.table import Table
    from sqlalchemy import select

    from runner.store import campaigns as crud
    from runner.store.models import Campaign

    console = _console()
    engine = _engine()
    with _session(engine) as session:
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

    console = _console()
    engine = _engine()
    with _session(engine) as session:
        camp = _get_campaign(session, args.id)
        data = load_campaign(session, campaign_id=args.id)
        console.print(f"campaign {camp.id} '{camp.name}': {camp.status}, backend {camp.backend}, "
                      f"{camp.cells_done}/{camp.cells_total} done, {camp.cells_failed} failed, "
                      f"{camp.cells_skipped} skipped; lab {camp.lab_version}")
    _print_failures(console, data)
    _emit(reporting.campaign_report(data, fmt=args.format or "text"), None)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from runner import reporting

    engine = _engine()
    with _session(engine) as session:
        try:
            out = reporting.compare_report(session, args.a, args.b, campaign=args.campaign,
                                           fmt=args.format or "text", speedup=args.speedup)
        except reporting.CompareError as exc:
            raise CliError(str(exc)) from None
    _emit(out, args.output)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from runner import reporting
    from runner.results import load_campaign

    engine = _engine()
    with _session(engine) as session:
        _get_campaign(session, args.id)
        data = load_campaign(session, campaign_id=args.id)
    _emit(reporting.campaign_report(data, fmt=args.format, speedup=args.speedup), args.output)
    return 0


def _emit(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text)
        print(f"wrote {output} ({len(text.encode())} bytes)", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def cmd_cancel(args: argparse.Namespace) -> int:
    from runner.store import campaigns as crud

    engine = _engine()
    with _session(engine) as session:
        try:
            camp = crud.cancel_campaign(session, campaign_id=args.id)
        except (LookupError, ValueError) as exc:
            raise CliError(str(exc)) from None
    print(f"campaign {camp.id} cancelled")
    return 0


def cmd_servers(args: argparse.Namespace) -> int:
    from rich.table import Table

    from runner.backends import local

    console = _console()
    if args.fetch:
        path = local.fetch_debian_server(args.fetch)
        console.print(f"{args.fetch}: extracted to {path}")
    from runner.backends.variants import options_for

    t = Table("server", "status (local backend)", "reason / how", "variant options (* docker backend only)")
    for name, reason in local.available_servers():
        t.add_row(name, "[green]can run[/]" if reason is None else "[yellow]skipped[/]", reason or "",
                  ", ".join(options_for(name)))
    console.print(t)
    return 0


def cmd_selftest(args: argparse.Namespace) -> int:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "loadgen_selftest.py"
    if not path.exists():
        raise CliError(f"selftest script not found at {path}")
    spec = importlib.util.spec_from_file_location("loadgen_selftest", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return int(mod.main(args.rest) or 0)


def cmd_db(args: argparse.Namespace) -> int:
    engine = _engine()  # connects and migrates
    print(engine.url.render_as_string(hide_password=True))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from runner import worker

    return int(worker.main(args) or 0)


def cmd_images(args: argparse.Namespace) -> int:
    from runner import images

    return int(images.main(args) or 0)


def cmd_loadgen(args: argparse.Namespace) -> int:
    from runner import loadgen_remote

    return int(loadgen_remote.main(args) or 0)


def cmd_serve(args: argparse.Namespace) -> int:
    from runner import multihost

    return int(multihost.serve_main(args) or 0)


def cmd_dashboard(args: argparse.Namespace) -> int:
    import uvicorn

    uvicorn.run("dashboard.app:create_app", factory=True, host=args.host, port=args.port, log_level="info")
    return 0


# ----------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``xferlab`` command."""
    p = argparse.ArgumentParser(prog="xferlab", description="Benchmark lab for file-transfer servers.")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a campaign and print its tables")
    r.add_argument("spec", nargs="?", help="campaign spec (YAML or JSON)")
    r.add_argument("--preset", help="built-in spec instead of a file (default: classic)")
    r.add_argument("--name", help="campaign name")
    r.add_argument("--servers", help="comma-separated servers: name[:version[:opt=val;opt=val]]")
    r.add_argument("--workloads", help="comma-separated workloads (default: the spec's)")
    r.add_argument("--repeats", type=int, help="repeats per cell (default 5)")
    r.add_argument("--clients", type=int, help="clients of the N-client workloads")
    r.add_argument("--file-size", help="file size of the concurrent workloads, e.g. 10M")
    r.add_argument("--transfer-size", help="fixture size of single-stream STOR/RETR, e.g. 256M")
    r.add_argument("--duration", type=float, help="seconds of single-stream transfer")
    r.add_argument("--login-mode", choices=("concurrent", "sequential"))
    r.add_argument("--passive", choices=("pasv", "epsv"))
    r.add_argument("--backend", choices=("auto", "local", "docker"))
    r.add_argument("--storage", help="storage axis: disk, tmpfs or disk,tmpfs (each server once per kind)")
    r.add_argument("--no-pin", action="store_true", help="no CPU pinning")
    r.add_argument("--format", choices=FORMATS, help="format of the printed tables (default text)")
    r.add_argument("--inventory", help="run across hosts: Ansible inventory with groups servers and clients "
                                       "(docs/multi-host.md)")
    r.set_defaults(func=cmd_run)

    rs = sub.add_parser("resume", help="finish the queued cells of an interrupted campaign")
    rs.add_argument("id", type=int)
    rs.add_argument("--format", choices=FORMATS)
    rs.set_defaults(func=cmd_resume)

    c = sub.add_parser("campaigns", help="list campaigns")
    c.add_argument("--limit", type=int, default=50)
    c.set_defaults(func=cmd_campaigns)

    s = sub.add_parser("show", help="one campaign's figures and failures")
    s.add_argument("id", type=int)
    s.add_argument("--format", choices=FORMATS)
    s.set_defaults(func=cmd_show)

    cp = sub.add_parser("compare", help="compare two servers (in a campaign) or two campaigns",
                        description="A and B are each a campaign id (one-server campaign), ID:SERVER, or a "
                                    "SERVER label looked up in --campaign (default: the latest campaign).")
    cp.add_argument("a")
    cp.add_argument("b")
    cp.add_argument("--campaign", type=int, help="campaign in which to look up SERVER labels")
    cp.add_argument("--format", choices=FORMATS)
    cp.add_argument("--speedup", action="store_true", help="add the seed's speedup column (new/old - 1)")
    cp.add_argument("-o", "--output", help="write to a file instead of stdout")
    cp.set_defaults(func=cmd_compare)

    e = sub.add_parser("export", help="export a campaign's tables")
    e.add_argument("id", type=int)
    e.add_argument("--format", choices=FORMATS, required=True)
    e.add_argument("--speedup", action="store_true", help="add the seed's speedup column")
    e.add_argument("-o", "--output", help="write to a file instead of stdout")
    e.set_defaults(func=cmd_export)

    ca = sub.add_parser("cancel", help="cancel a queued or running campaign")
    ca.add_argument("id", type=int)
    ca.set_defaults(func=cmd_cancel)

    sv = sub.add_parser("servers", help="which servers can run here, and why not")
    sv.add_argument("--fetch", help="extract a Debian FTP server package into the cache (vsftpd, proftpd, pureftpd)")
    sv.set_defaults(func=cmd_servers)

    st = sub.add_parser("selftest", help="load generator vs a plain-socket reader, same run")
    st.add_argument("rest", nargs=argparse.REMAINDER)
    st.set_defaults(func=cmd_selftest)

    w = sub.add_parser("worker", help="claim and run queued campaigns (the compose worker service)")
    w.add_argument("--once", action="store_true", help="exit when no queued cell is left")
    w.add_argument("--poll", type=float, default=2.0, help="seconds between polls when idle")
    w.set_defaults(func=cmd_worker)

    im = sub.add_parser("images", help="container images: bootstrap the Debian base offline, build, list")
    from runner.images import add_arguments as _images_args

    _images_args(im)
    im.set_defaults(func=cmd_images)

    lg = sub.add_parser("loadgen", help="run one load phase from this host at a given time, print JSON (multi-host)")
    from runner.loadgen_remote import add_arguments as _loadgen_args

    _loadgen_args(lg)
    lg.set_defaults(func=cmd_loadgen)

    se = sub.add_parser("serve", help="start one server on this host, driven over stdin (multi-host)")
    from runner.multihost import add_serve_arguments as _serve_args

    _serve_args(se)
    se.set_defaults(func=cmd_serve)

    ds = sub.add_parser("dashboard", help="serve the web dashboard")
    ds.add_argument("--host", default="127.0.0.1")
    ds.add_argument("--port", type=int, default=8000)
    ds.set_defaults(func=cmd_dashboard)

    d = sub.add_parser("db", help="print the database URL in use (migrating it)")
    d.set_defaults(func=cmd_db)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``xferlab`` console script. Returns the exit status."""
    import warnings

    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    from runner.spec import SpecError
    from runner.store.db import DatabaseError

    try:
        return args.func(args)
    except (CliError, SpecError, DatabaseError) as exc:
        print(f"xferlab: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
