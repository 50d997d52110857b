"""``xferlab calibrate``: A/A noise calibration. The same build is measured against itself
in N campaigns (a spec, or one ``--server`` and ``--workload``), then each series of those
campaigns gets its noise floor and the false-alarm rate of the regression rule, stored
in ``noise_calibration`` (runner.history.calibration; docs/methodology.md)."""
from __future__ import annotations

import argparse
import json
import statistics

from runner.cli import common
from runner.cli.common import CliError

#: Most cells of one calibration (N campaigns x cells per campaign).
MAX_CELLS = 400


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``xferlab calibrate``."""
    p.add_argument("spec", nargs="?", help="campaign spec (YAML or JSON) of one build; or --server and --workload")
    p.add_argument("--server", help="name[:version[:opt=val;...]] (one server)")
    p.add_argument("--workload", help="one workload, e.g. retr")
    p.add_argument("-n", "--runs", type=int, default=5, help="A/A runs (campaigns), 2 to 20 (default 5)")
    p.add_argument("--repeats", type=int, help="repeats per cell in each run (default: the spec's)")
    p.add_argument("--transfer-size", help="fixture size of single-stream STOR/RETR, e.g. 64M")
    p.add_argument("--duration", type=float, help="seconds of single-stream transfer")
    p.add_argument("--clients", type=int, help="clients of the N-client workloads")
    p.add_argument("--file-size", help="file size of the concurrent workloads")
    p.add_argument("--backend", choices=("auto", "local", "docker"))
    p.add_argument("--no-pin", action="store_true", help="no CPU pinning")
    p.add_argument("--alpha", type=float, help="false-discovery rate the false alarms are counted at (default 0.05)")
    p.add_argument("--min-effect", type=float, help="minimum effect the false alarms are counted at (default 0.05)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--list", action="store_true", help="print the stored calibrations (the newest of each series "
                                                       "and environment class) and run nothing")


def _spec(args: argparse.Namespace):
    from runner.cli.campaign import _build_spec
    from runner.history.calibration import MAX_RUNS

    if not 2 <= args.runs <= MAX_RUNS:
        raise CliError(f"-n/--runs must be 2 to {MAX_RUNS}, got {args.runs}")
    if args.repeats is not None and args.repeats < 2:
        raise CliError(f"--repeats must be at least 2 (a Mann-Whitney test needs samples), got {args.repeats}")
    if args.spec and (args.server or args.workload):
        raise CliError("give a SPEC file or --server and --workload, not both")
    if not args.spec and not (args.server and args.workload):
        raise CliError("give a SPEC file, or both --server and --workload")
    if args.server and "," in args.server:
        raise CliError(f"--server {args.server!r}: one server (an A/A test measures one build)")
    ns = argparse.Namespace(spec=args.spec, preset=None, name=None, servers=args.server, workloads=args.workload,
                            repeats=args.repeats, clients=args.clients, file_size=args.file_size,
                            transfer_size=args.transfer_size, duration=args.duration, login_mode=None,
                            passive=None, backend=args.backend, driver=None, storage=None, link=None, tls=None,
                            tls_key=None, no_pin=args.no_pin, format=None, inventory=None)
    spec = _build_spec(ns)
    labels = {s.label or s.name for s in spec.servers}
    if len(spec.servers) != 1:
        raise CliError(f"an A/A calibration measures one build: the spec expands to {len(spec.servers)} servers "
                       f"({', '.join(sorted(labels))})")
    return spec


def _line(row) -> str:
    """One calibration row as a line of text."""
    from runner.history import SeriesKey

    key = SeriesKey(row.server, row.track, row.workload, row.params_key, row.metric)
    medians = [statistics.median(s) for s in row.runs_samples]
    return (f"  {key.title} [{key.params_key}] env {row.env_class}: medians "
            f"{', '.join(f'{m:.4g}' for m in medians)} {row.unit}; noise floor {row.noise_floor * 100:.2f}% "
            f"(cv {row.cv * 100:.2f}%); false alarms {row.false_alarms}/{row.pairs} pairs "
            f"({row.false_alarm_rate * 100:.1f}%), {row.series_alarms} in the series")


def _list() -> int:
    from runner.history.calibration import latest_calibrations

    with common.session(common.engine()) as session:
        rows = latest_calibrations(session)
    if not rows:
        print("no calibration stored (run `xferlab calibrate`)")
    shown = None
    for row in sorted(rows, key=lambda r: (r.calibration or 0, r.id)):
        if row.calibration != shown:
            shown = row.calibration
            print(f"calibration {row.calibration} ({row.created_at:%Y-%m-%d %H:%M}, campaigns "
                  f"{', '.join(map(str, row.campaign_ids))}, alpha {row.alpha}, minimum effect "
                  f"{row.min_effect * 100:g}%)")
        print(_line(row))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Run the A/A campaigns, analyse and store; print each series' noise floor
    (``--list``: print the stored calibrations instead)."""
    if args.list:
        return _list()
    from runner.campaign.loop import resolve_backend
    from runner.cli.campaign import _run_with_progress
    from runner.cli.history import _thresholds
    from runner.history.calibration import calibrate_campaigns, store_results
    from runner.spec.model import expand
    from runner.store import campaigns as crud

    alpha, min_effect = _thresholds(args)
    spec = _spec(args)
    cells = len(expand(spec))
    if cells * args.runs > MAX_CELLS:
        raise CliError(f"{args.runs} runs of {cells} cells: {cells * args.runs} cells, more than {MAX_CELLS}")
    backend = resolve_backend(spec.backend)
    console = common.console()
    eng = common.engine()
    ids = []
    base = spec.name
    for i in range(args.runs):
        run = spec.model_copy(update={"name": f"{base} A/A {i + 1}/{args.runs}"})
        with common.session(eng) as session:
            crud.reap_dead_workers(session)
            camp = crud.create_campaign(session, spec=run, backend=backend.name, owner=crud.worker_id())
            session.commit()
            cid, total = camp.id, camp.cells_total
        console.print(f"A/A run {i + 1}/{args.runs}: campaign {cid} ({total} cells, backend {backend.name})")
        _run_with_progress(console, eng, cid, total, 0)
        ids.append(cid)
    with common.session(eng) as session:
        try:
            results = calibrate_campaigns(session, ids, alpha=alpha, min_effect=min_effect)
        except ValueError as exc:
            raise CliError(f"calibration of campaigns {ids}: {exc}") from None
        rows = store_results(session, results)
        session.commit()
    if args.json:
        print(json.dumps([{"calibration": row.calibration, "series": r.key.as_dict(), "figure": row.figure,
                           "unit": row.unit, "env_class": r.env_class, "version": r.version, "commit": r.commit,
                           "campaigns": r.campaign_ids, "samples_per_run": [len(x) for x in r.runs_samples],
                           "medians": r.medians, "noise_floor": r.noise_floor,
                           "cv": r.cv, "pairs": r.pairs, "false_alarms": r.false_alarms,
                           "false_alarm_rate": r.false_alarm_rate, "series_alarms": r.series_alarms,
                           "alpha": r.alpha, "min_effect": r.min_effect} for r, row in zip(results, rows)],
                         indent=1))
        return 0
    print(f"calibration {rows[0].calibration}: {args.runs} A/A runs (campaigns {', '.join(map(str, ids))}), "
          f"alpha {alpha}, minimum effect {min_effect * 100:g}%")
    for row in rows:
        print(_line(row))
    return 0
