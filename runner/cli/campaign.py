"""``xferlab run`` and ``xferlab resume``: run a campaign in the foreground with a progress
bar, then print its tables."""
from __future__ import annotations

import argparse
import os
import re
import threading
import time
from typing import Any

from runner.cli import common
from runner.cli.common import CliError


def _build_spec(args: argparse.Namespace):
    from runner.spec.model import parse_spec, read_spec_data

    if args.spec and args.preset:
        raise CliError("give a SPEC file or --preset, not both")
    if args.spec:
        raw = read_spec_data(args.spec)
        spec = parse_spec(raw, args.spec)
    else:
        from runner.spec.presets import preset_data as read_preset

        preset = args.preset or "classic"
        try:
            preset_data = read_preset(preset)
        except LookupError as exc:
            raise CliError(str(exc)) from None
        if len(os.sched_getaffinity(0)) >= 2:
            cpus = sorted(os.sched_getaffinity(0))
            preset_data.setdefault("pinning", {"server": [cpus[0]], "client": [cpus[1]]})
        spec = parse_spec(preset_data, f"preset {preset}")
        raw = preset_data
    data: dict[str, Any] = spec.model_dump(mode="json")
    # the servers as written, before the storage and link axes expanded them: the axes are
    # expanded again from the (possibly overridden) lists, so --link 100mbit on a preset
    # with link: [loopback, 100mbit] leaves one copy of each server, not two
    data["servers"] = list(raw["servers"])
    if args.repeats is not None:
        data["repeats"] = args.repeats
        if args.repeats != "auto":  # a fixed number replaces the preset's adaptive repeats
            data["max_repeats"] = None
    if args.backend:
        data["backend"] = args.backend
    if getattr(args, "driver", None):
        data["driver"] = args.driver
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
            if "clients" in overrides:  # --clients N replaces a sweep (a list in params.clients, or sweep:)
                w.pop("sweep", None)
    if args.storage:
        data["storage"] = [k.strip() for k in args.storage.split(",") if k.strip()]
    if getattr(args, "link", None):
        data["link"] = [k.strip() for item in args.link for k in item.split(",") if k.strip()]
    if getattr(args, "tls", None):
        data["tls"] = [k.strip() for k in args.tls.split(",") if k.strip()]
    if getattr(args, "tls_key", None):
        data["tls_key"] = args.tls_key
    if args.no_pin:
        data["pinning"] = {}
    if getattr(args, "profile", False):
        _profile_all(data)
    if getattr(args, "inventory", None):
        data["hosts"] = {**(data.get("hosts") or {}), "inventory": args.inventory}
    return parse_spec(data, args.spec or f"preset {args.preset or 'classic'} with command-line options")


def _profile_all(data: dict[str, Any]) -> None:
    """``--profile``: profile every cell. The spec's ``profile`` becomes true unless it is
    already a settings object, and every entry's ``profile: false`` is dropped (it inherits)."""
    if not isinstance(data.get("profile"), dict):
        data["profile"] = True
    for key in ("servers", "workloads"):
        for entry in data.get(key) or []:
            if isinstance(entry, dict) and entry.get("profile") is False:
                entry.pop("profile")


def _parse_server(text: str) -> dict[str, Any]:
    """``pyftpdlib``, ``pyftpdlib:2.2.0`` or ``pyftpdlib:2.2.0:use_sendfile=false``."""
    parts = text.strip().split(":")
    d: dict[str, Any] = {"name": parts[0]}
    if len(parts) > 1 and parts[1]:
        d["version"] = parts[1]
    if len(parts) > 2:
        from runner.catalogue.variants import parse_variant_text

        try:
            variant = parse_variant_text(parts[2])
        except ValueError as e:
            raise CliError(f"--servers {text!r}: variant options: {e}") from None
        d["variant"] = variant
    return d


class RichReporter:
    """Progress bar per campaign with the cell now running and the last cell's figures."""

    def __init__(self, console, total: int, done: int = 0):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

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
        """Show ``text`` as the bar's description; an image's start, end or failure
        (``building image NAME i/n``, ``...: built TAG``, ``... failed: ...``) also stays
        printed above the bar."""
        if re.match(r"(building image |image .* \d+/\d+(: built | failed: ))", text):
            self.progress.console.print(f"  {text}", markup=False, highlight=False)
        self.progress.update(self.task, description=text[:80])


class PlainReporter:
    """Plain progress lines for output that is not a terminal (a CI log, ``make classic |
    tee``): ``HH:MM:SS [i/total] server · workload · #r`` when a cell starts, its
    outcome when it ends, each progress message (image builds, fixtures, phases)
    indented, and a :class:`runner.campaign.loop.Heartbeat` line whenever nothing was printed
    for ``interval`` seconds (Settings.progress_interval). Each line is flushed."""

    def __init__(self, console, total: int, done: int = 0, *, interval: float):
        from runner.campaign.loop import Heartbeat

        self.console = console
        self.total = total
        self._lock = threading.Lock()
        self.heartbeat = Heartbeat(self._line, interval)
        self.heartbeat.activity("preparing the campaign")
        self._server: str | None = None  # the running cell's server: names whose fixture it is

    def __enter__(self):
        self.heartbeat.start()
        return self

    def __exit__(self, *exc):
        self.heartbeat.stop()

    def _line(self, text: str) -> None:
        with self._lock:
            self.console.print(f"{time.strftime('%H:%M:%S')} {text}", markup=False, highlight=False,
                               soft_wrap=True)
            self.console.file.flush()

    def cell_started(self, cell, index: int, total: int) -> None:
        what = f"cell {index}/{total} {cell.server_label} · {cell.workload} · #{cell.repeat + 1}"
        self._server = cell.server_label
        self.heartbeat.activity(what)
        self._line(what)
        self.heartbeat.wrote()

    def cell_finished(self, cell, status: str, summary: str) -> None:
        self._line(f"  {status:>7} {cell.server_label} · {cell.workload} · #{cell.repeat + 1}  {summary}")
        self._server = None
        self.heartbeat.wrote()

    def message(self, text: str) -> None:
        if text.startswith(("building image ", "base image")) or "missing: bootstrapping" in text:
            self.heartbeat.activity(text)
        self._line(f"  {self._server}: {text}" if self._server else f"  {text}")
        self.heartbeat.wrote(text)


def reporter_for(console, total: int, done: int = 0):
    """The progress display of a foreground run: :class:`RichReporter` (a live bar) on a
    terminal, else :class:`PlainReporter` (plain lines, a heartbeat at least every
    Settings.progress_interval seconds)."""
    if console.is_terminal:
        return RichReporter(console, total, done)
    from runner.config import get_settings

    return PlainReporter(console, total, done, interval=get_settings().progress_interval)


def cmd_run(args: argparse.Namespace) -> int:
    from runner.campaign.loop import resolve_backend
    from runner.store import campaigns as crud

    console = common.console()
    spec = _build_spec(args)
    backend = resolve_backend(spec.backend)
    engine = common.engine()
    with common.session(engine) as session:
        crud.reap_dead_workers(session)
        camp = crud.create_campaign(session, spec=spec, backend=backend.name, owner=crud.worker_id())
        session.commit()
        cid, total = camp.id, camp.cells_total
    console.print(f"campaign [bold]{cid}[/] '{spec.name}': {total} cells "
                  f"({len(spec.servers)} servers, backend {backend.name}, {_repeats_text(spec)})")
    if backend.name == "local":
        _warn_syncookies(console)
    _run_with_progress(console, engine, cid, total, 0)
    return _print_results(console, engine, cid, args)


def _repeats_text(spec) -> str:
    if spec.max_repeats:
        return (f"{spec.repeats} to {spec.max_repeats} repeats, until the 95% CI is within "
                f"+-{spec.target_ci * 100:g}% of the median")
    return f"{spec.repeats} repeats"


def _warn_syncookies(console) -> None:
    """Local servers share this host's network namespace: say so when SYN cookies are on
    (docs/methodology.md, "Slow is a figure"; the docker backend and the Ansible tuning
    role turn them off)."""
    from runner.metrics.environment import read_sysctl

    if read_sysctl("net.ipv4.tcp_syncookies") not in (None, "0"):
        console.print("[yellow]note:[/] net.ipv4.tcp_syncookies is on here: a server with a small listen backlog "
                      "(vsftpd: 32) can leave sessions waiting for a greeting that never comes under a burst of "
                      "connects; `sysctl -w net.ipv4.tcp_syncookies=0` (or the Ansible tuning role) turns it off")


def _on_sigterm(signum, frame) -> None:
    raise KeyboardInterrupt  # as Ctrl-C: the cell's finally blocks stop its server, link and clients


def _run_with_progress(console, engine, cid: int, total: int, done: int) -> None:
    """Run the campaign's cells with a progress display. SIGTERM is handled as Ctrl-C
    (Python's default would end the process without running any ``finally``, leaving the
    cell's container, link namespaces and client processes behind): the campaign is
    cancelled, its finished cells stay stored, exit status 130."""
    import signal

    from runner.campaign.loop import run_campaign

    old = signal.signal(signal.SIGTERM, _on_sigterm) if threading.current_thread() is threading.main_thread() \
        else None
    with reporter_for(console, total, done) as rep:
        try:
            run_campaign(engine, cid, reporter=rep)
        except KeyboardInterrupt:
            from runner.store import campaigns as crud

            with common.session(engine) as session:
                crud.cancel_campaign(session, campaign_id=cid)
            console.print(f"[red]interrupted[/]: campaign {cid} cancelled; finished cells are stored")
            raise SystemExit(130) from None
        finally:
            if old is not None:
                signal.signal(signal.SIGTERM, old)


def _print_results(console, engine, cid: int, args) -> int:
    from runner.report.reader import load_campaign

    with common.session(engine) as session:
        data = load_campaign(session, campaign_id=cid)
        camp = common.get_campaign(session, cid)
    console.print(f"\ncampaign {cid}: {camp.status}: {camp.cells_done} done, {camp.cells_failed} failed, "
                  f"{camp.cells_skipped} skipped of {camp.cells_total}")
    _print_failures(console, data)
    from runner.report import render as reporting

    common.emit(reporting.campaign_report(data, fmt=getattr(args, "format", None) or "text"), None)
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



def cmd_resume(args: argparse.Namespace) -> int:
    from sqlalchemy import func, select

    from runner.store import campaigns as crud
    from runner.store.models import Cell

    console = common.console()
    engine = common.engine()
    with common.session(engine) as session:
        crud.reap_dead_workers(session)
        camp = common.get_campaign(session, args.id)
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

