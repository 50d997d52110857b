"""``xferlab check`` (a CI gate: candidate vs baseline, exit 1 on a significant regression)
and ``xferlab bisect`` (the first commit where a figure regressed): the maintainer's loop
over a server built from source (runner.campaign.check, runner.campaign.bisect); and
``xferlab bisect-cancel`` (a bisect queued from the dashboard, runner.campaign.bisect_job)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from runner.cli import common
from runner.cli.common import CliError


def min_effect_arg(text: str) -> float:
    """``--min-effect``: ``5%`` or ``0.05`` (a relative change, 0 to 10)."""
    try:
        x = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an effect: {text!r} (want e.g. 5% or 0.05)") from None
    if not 0 <= x <= 10:
        raise argparse.ArgumentTypeError(f"effect out of range: {text!r} (0% to 1000%)")
    return x


def param_arg(text: str) -> tuple[str, Any]:
    """``--param KEY=VALUE``: the value as an int, a float, or the text."""
    key, eq, value = text.partition("=")
    if not eq or not key:
        raise argparse.ArgumentTypeError(f"want KEY=VALUE, got {text!r}")
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            pass
    return key, value


def add_check_arguments(p: argparse.ArgumentParser) -> None:
    """``xferlab check``'s arguments."""
    p.add_argument("spec", help="campaign spec (YAML or JSON) whose server entries with 'source' are checked")
    p.add_argument("--candidate", required=True, help="a ref (SHA, branch, tag) or a checkout directory (as it is)")
    p.add_argument("--baseline", required=True, help="a ref, or the id of a stored campaign of the same spec")
    p.add_argument("--min-effect", type=min_effect_arg, default=None,
                   help="smallest relative change that counts, e.g. 5%% (default 5%%, per metric where calibrated)")
    p.add_argument("--metric", action="append", default=[],
                   help="also compare this metric (default: each workload's row metric); repeatable")
    p.add_argument("--repeats", type=int, help="repeats per cell (default: the spec's)")
    p.add_argument("--markdown", help="write the Markdown summary here (e.g. \"$GITHUB_STEP_SUMMARY\")")
    p.add_argument("--junit", help="write JUnit XML here")


def add_bisect_arguments(p: argparse.ArgumentParser) -> None:
    """``xferlab bisect``'s arguments."""
    p.add_argument("--server", required=True, help="server kind built from source (pyftpdlib, twisted, tpd)")
    p.add_argument("--source", required=True, help="its git checkout or git URL")
    p.add_argument("--good", required=True, help="a ref where the figure is good")
    p.add_argument("--bad", required=True, help="a later ref where it is bad")
    p.add_argument("--workload", required=True, help="workload to run, e.g. retr_concurrent")
    p.add_argument("--param", type=param_arg, action="append", default=[],
                   help="workload parameter KEY=VALUE, e.g. clients=4; repeatable")
    p.add_argument("--metric", required=True, help="the figure that regressed, e.g. elapsed or throughput")
    p.add_argument("--repeats", type=int, default=5, help="repeats per measured commit (default 5)")
    p.add_argument("--max-rounds", type=int, default=3, help="most measurements of one undecided commit")
    p.add_argument("--min-effect", type=min_effect_arg, default=None, help="smallest good/bad change, e.g. 5%%")
    p.add_argument("--backend", choices=("auto", "local", "docker"), default="auto")
    p.add_argument("--no-warmup", action="store_true", help="no unrecorded warm-up pass before each cell")
    p.add_argument("--json", help="write the result (first bad commit, confirmed, every step) here as JSON")


class LineReporter:
    """Progress of a campaign run by check or bisect: one line per finished cell."""

    def __init__(self, console):
        self.console = console

    def _line(self, text: str) -> None:
        self.console.print(f"{time.strftime('%H:%M:%S')} {text}", markup=False, highlight=False, soft_wrap=True)

    def cell_started(self, cell, index: int, total: int) -> None:
        """Nothing: the line comes when the cell ends."""

    def cell_finished(self, cell, status: str, summary: str) -> None:
        """``  done  LABEL · WORKLOAD · #N  SUMMARY``."""
        self._line(f"  {status:>7} {cell.server_label} · {cell.workload} · #{cell.repeat + 1}  {summary}")

    def message(self, text: str) -> None:
        """Build and fixture messages, indented."""
        if text.startswith(("building ", "creating ")):
            self._line(f"    {text}")


def _is_campaign_id(text: str) -> bool:
    return text.isdigit()


def cmd_check(args: argparse.Namespace) -> int:
    """Run ``xferlab check``; exit 1 on a regression (or a figure the candidate could not
    measure), 0 otherwise, 2 on bad input."""
    from runner.campaign import gate
    from runner.campaign.check import junit, markdown, run_check
    from runner.spec.model import parse_spec, read_spec_data

    console = common.console()
    spec = parse_spec(read_spec_data(args.spec), args.spec)
    if args.repeats is not None:
        spec = parse_spec({**spec.model_dump(mode="json", exclude_none=True), "repeats": args.repeats,
                           "max_repeats": None}, f"{args.spec} with --repeats")
    engine = common.engine()
    rep = LineReporter(console)
    try:
        if Path(args.candidate).is_dir():
            cand_spec = gate.at_source(spec, source=str(Path(args.candidate).resolve()), ref=None,
                                       name=f"check candidate {args.candidate}")
        else:
            cand_spec = gate.at_source(spec, ref=args.candidate, name=f"check candidate {args.candidate}")
        if _is_campaign_id(args.baseline):
            base_id = int(args.baseline)
            with common.session(engine) as s:
                common.get_campaign(s, base_id)
            base_what = f"campaign {base_id}"
        else:
            base_spec = gate.at_source(spec, ref=args.baseline, name=f"check baseline {args.baseline}")
            console.print(f"baseline {args.baseline}: running {spec.name!r}")
            base_id = gate.run_stored(engine, base_spec, rep)
            base_what = args.baseline
    except ValueError as e:
        raise CliError(str(e)) from None
    console.print(f"candidate {args.candidate}: running {spec.name!r}")
    cand_id = gate.run_stored(engine, cand_spec, rep)
    min_effect = gate.DEFAULT_MIN_EFFECT if args.min_effect is None else args.min_effect
    try:
        res = run_check(gate.read(engine, base_id), gate.read(engine, cand_id), baseline_what=base_what,
                        candidate_what=args.candidate, min_effect=min_effect, metrics=args.metric,
                        calibration=engine if args.min_effect is None else None)
    except ValueError as e:
        raise CliError(str(e)) from None
    md = markdown(res)
    sys.stdout.write(md)
    if args.markdown:
        common.emit(md, args.markdown)
    if args.junit:
        common.emit(junit(res), args.junit)
    return 1 if res.failed else 0


def cmd_bisect(args: argparse.Namespace) -> int:
    """Run ``xferlab bisect``; print the first bad commit. Exit 0 when it is found and
    confirmed, 1 when the re-measure does not confirm it or the bisect cannot decide."""
    from runner.campaign import gate
    from runner.campaign.bisect import BisectError, Bisector, in_repo_order
    from runner.spec.model import parse_spec

    console = common.console()
    data: dict[str, Any] = {
        "name": f"bisect {args.server}", "repeats": args.repeats, "backend": args.backend,
        "warmup": not args.no_warmup,
        "servers": [{"name": args.server, "source": args.source, "ref": args.bad}],
        "workloads": [{"name": args.workload, "params": dict(args.param)}]}
    spec = parse_spec(data, "bisect options")

    def say(text: str) -> None:
        console.print(f"{time.strftime('%H:%M:%S')} {text}", markup=False, highlight=False, soft_wrap=True)

    min_effect = gate.DEFAULT_MIN_EFFECT if args.min_effect is None else args.min_effect
    b = Bisector(common.engine(), spec, workload=args.workload, metric=args.metric, reporter=LineReporter(console),
                 say=say, min_effect=gate.min_effect_for(args.metric, None, min_effect,
                                                engine=common.engine() if args.min_effect is None else None),
                 max_rounds=args.max_rounds)
    try:
        res = b.run(args.good, args.bad)
    except BisectError as e:
        say(f"bisect stopped: {e}")
        return 1
    say(f"steps, in the repository's order ({len(res.commits)} commits, good end first):")
    for pos, st in in_repo_order(res.commits, res.steps):
        at = f"{pos + 1:>{len(str(len(res.commits)))}}" if pos >= 0 else "-" * len(str(len(res.commits)))
        say(f"  {at} {st.commit[:12]} {st.role:>7} {st.verdict:>4}  median {st.median:.4g} {st.unit}  campaigns "
            f"{','.join(map(str, st.campaigns))}  {st.subject[:60]}")
    state = "confirmed" if res.confirmed else "NOT confirmed by the re-measure"
    if args.json:
        import dataclasses
        import json

        doc = {"version": 1, "server": args.server, "source": spec.servers[0].source, "good": args.good,
               "bad": args.bad, "workload": args.workload, "metric": args.metric, **dataclasses.asdict(res)}
        common.emit(json.dumps(doc, indent=1) + "\n", args.json)
    print(f"first bad commit: {res.first_bad} {res.subject} ({state})")
    return 0 if res.confirmed else 1


def cmd_bisect_cancel(args: argparse.Namespace) -> int:
    """Cancel the dashboard's bisect ``args.id`` (runner.campaign.bisect_job.cancel). Exit 0;
    CliError for an unknown id or a bisect already finished."""
    from runner.campaign import bisect_job

    with common.session(common.engine()) as session:
        try:
            job = bisect_job.cancel(session, args.id, "from the command line")
        except (LookupError, ValueError) as exc:
            raise CliError(str(exc)) from None
        running = job.finished_at is None
    print(f"bisect {args.id} cancelled" + ("; its worker stops after the cell in flight" if running else ""))
    return 0
