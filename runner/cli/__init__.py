"""The ``xferlab`` command: one registry of subcommands (:data:`COMMANDS`: name -> help,
argument builder, handler), handlers imported only when their command runs (pyperf
``__main__`` style) and arguments built only for the command named (:func:`parse_args`:
``xferlab loadgen`` does not import the Docker SDK that ``images``' arguments need).
``python -m runner.cli`` works too (``__main__.py``).

    xferlab run [SPEC | --preset NAME] [overrides]      run a campaign, print its tables (runner/spec/preset_specs/)
    xferlab resume ID                                   finish an interrupted campaign
    xferlab campaigns                                   list campaigns
    xferlab show ID                                     one campaign's figures and failures
    xferlab compare A B [--format F] [--profile]        compare two servers or campaigns (and their profiles)
    xferlab profile CELL_ID [-o DIR]                    a profiled cell's flame graph, folded stacks, syscalls
    xferlab export ID --format F                        export a campaign
    xferlab cancel ID                                   cancel a queued or running campaign
    xferlab servers [--fetch NAME] [--json]             what can run here (local and docker), and why not
    xferlab selftest [--quick ...]                      load-generator speed vs the C receiver and the loopback limit
    xferlab worker                                      run queued campaigns (for the dashboard)
    xferlab images bootstrap|build|list                 container images, built offline (docker backend)
    xferlab compose-targets [-p PROJECT] [-o FILE]      a spec: compose/servers.yml's running services as external
    xferlab dashboard                                   serve the web dashboard
    xferlab loadgen --host H --port P ... --start-at T   one load phase from this host, as JSON (multi-host)
    xferlab serve --server JSON --bind ADDR             one server on this host, driven over stdin (multi-host)
    xferlab db                                          where the database is; migrate it
    xferlab check SPEC --candidate REF --baseline REF|ID  CI gate: exit 1 on a significant regression
    xferlab bisect --server S --source P --good G --bad B  the first commit where a figure regressed
    xferlab bisect-cancel ID                            cancel a bisect queued from the dashboard
    xferlab history [SERVER:WORKLOAD] [--by commit]     one series by campaign or by commit (or every series)
    xferlab regressions                                 significant changes, what moved in the environment
    xferlab calibrate SPEC | --server S --workload W -n N   A/A runs: noise floor and false-alarm rate
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module

from runner.cli.common import CliError
from runner.report import FORMATS

__all__ = ["COMMANDS", "CliError", "Command", "FORMATS", "build_parser", "main"]


@dataclass(frozen=True)
class Command:
    """One subcommand.

    Attributes:
        name: as typed, e.g. ``"run"``.
        help: one line in ``xferlab --help``.
        handler: ``"module:function"`` taking the parsed Namespace and returning the exit
            status; imported when the command runs.
        arguments: adds the subcommand's arguments to its parser (None: no arguments).
        description: longer text of ``xferlab NAME --help`` (None: none).
    """

    name: str
    help: str
    handler: str
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    description: str | None = None


def _repeats_arg(text: str) -> int | str:
    """``--repeats``: a positive integer or ``auto``."""
    if text == "auto":
        return text
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of repeats: {text!r} (want N or auto)") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"repeats must be at least 1, not {n}")
    return n


def _run_args(r: argparse.ArgumentParser) -> None:
    r.add_argument("spec", nargs="?", help="campaign spec (YAML or JSON)")
    r.add_argument("--preset", help="built-in spec instead of a file (runner/spec/preset_specs/): classic "
                                    "(seed 000, the default), seed002 (HTTP uploads, disk vs. tmpfs), "
                                    "seed003 (lftp buffer sizes), seed004 (512 wget downloads, fairness), "
                                    "realistic (sustainable users of every FTP server)")
    r.add_argument("--name", help="campaign name")
    r.add_argument("--servers", help="comma-separated servers: name[:version[:opt=val;opt=val]]")
    r.add_argument("--workloads", help="comma-separated workloads (default: the spec's)")
    r.add_argument("--repeats", type=_repeats_arg,
                   help="repeats per cell: N, or auto (3 to 10, until the figure is steady; the classic preset's)")
    r.add_argument("--clients", type=int, help="clients of the N-client workloads")
    r.add_argument("--file-size", help="file size of the concurrent workloads, e.g. 10M")
    r.add_argument("--transfer-size", help="fixture size of single-stream STOR/RETR, e.g. 256M")
    r.add_argument("--duration", type=float, help="seconds of single-stream transfer")
    r.add_argument("--login-mode", choices=("concurrent", "sequential", "window"))
    r.add_argument("--passive", choices=("pasv", "epsv"))
    r.add_argument("--backend", choices=("auto", "local", "docker"))
    r.add_argument("--driver", help="what makes the load (runner/load/): xferlab-ftp, xferlab-http, wrk, h2load, "
                                    "lftp, wget, curl; default: xferlab-ftp for FTP workloads, xferlab-http for HTTP")
    r.add_argument("--storage", help="storage axis: disk, tmpfs or disk,tmpfs (each server once per kind)")
    r.add_argument("--link", action="append", help="link axis (runner/net/conditions.py): loopback, 100mbit, "
                                                   "100mbit/1ms/0.1%%; repeat the flag or give a comma list "
                                                   "(each server once per link; a shaped link needs root)")
    r.add_argument("--tls", help="TLS axis (FTPS): none, explicit, implicit or a comma list such as none,explicit "
                                 "(each FTP server once per mode; servers without it: skipped cells)")
    r.add_argument("--tls-key", choices=("ecdsa-p256", "rsa-2048"),
                   help="key type of the campaign's certificates (default ecdsa-p256)")
    r.add_argument("--no-pin", action="store_true", help="no CPU pinning")
    r.add_argument("--profile", action="store_true",
                   help="profile every cell's measured phase (perf, py-spy; docs/methodology.md, 'Server profiles'); "
                        "entries' own profile settings are kept, a 'profile: false' is overridden")
    r.add_argument("--format", choices=FORMATS, help="format of the printed tables (default text)")
    r.add_argument("--inventory", help="run across hosts: Ansible inventory with groups servers and clients "
                                       "(docs/multi-host.md)")


def _id_format_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", type=int)
    p.add_argument("--format", choices=FORMATS)


def _show_args(p: argparse.ArgumentParser) -> None:
    _id_format_args(p)
    p.add_argument("--timing", action="store_true",
                   help="where the campaign's time went: each cell stage (start, warm-up, phase, store...)")


def _campaigns_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=50)


def _compare_args(cp: argparse.ArgumentParser) -> None:
    cp.add_argument("a")
    cp.add_argument("b")
    cp.add_argument("--campaign", type=int, help="campaign in which to look up SERVER labels")
    cp.add_argument("--format", choices=FORMATS)
    cp.add_argument("--speedup", action="store_true", help="add the seed's speedup column (new/old - 1)")
    cp.add_argument("-o", "--output", help="write to a file instead of stdout")
    cp.add_argument("--profile", action="store_true",
                    help="also write the differential flame graph of each workload profiled on both sides")
    cp.add_argument("--profile-dir", default=".", help="folder of the --profile SVGs (default: .)")


def _profile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("cell_id", type=int, help="a profiled cell's id (the dashboard's campaign page lists them)")
    p.add_argument("-o", "--output", default=".", help="folder to write the files into (default: .)")


def _export_args(e: argparse.ArgumentParser) -> None:
    e.add_argument("id", type=int)
    e.add_argument("--format", choices=FORMATS, required=True)
    e.add_argument("--speedup", action="store_true", help="add the seed's speedup column")
    e.add_argument("-o", "--output", help="write to a file instead of stdout")


def _cancel_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", type=int)


def _servers_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fetch", help="extract a Debian FTP server package into the cache (vsftpd, proftpd, pureftpd)")
    p.add_argument("--json", action="store_true", help="print the status as JSON (stable keys, for scripts)")


def _selftest_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("rest", nargs=argparse.REMAINDER)


def _worker_args(w: argparse.ArgumentParser) -> None:
    w.add_argument("--once", action="store_true", help="exit when no queued cell is left")
    w.add_argument("--poll", type=float, default=2.0, help="seconds between polls when idle")


def _images_args(p: argparse.ArgumentParser) -> None:
    from runner.cli.images import add_arguments

    add_arguments(p)


def _compose_targets_args(p: argparse.ArgumentParser) -> None:
    from runner.cli.compose import add_arguments

    add_arguments(p)


def _loadgen_args(p: argparse.ArgumentParser) -> None:
    from runner.multihost.loadgen import add_arguments

    add_arguments(p)


def _serve_args(p: argparse.ArgumentParser) -> None:
    from runner.multihost.serve import add_serve_arguments

    add_serve_arguments(p)


def _check_args(p: argparse.ArgumentParser) -> None:
    from runner.cli.maintainer import add_check_arguments

    add_check_arguments(p)


def _bisect_args(p: argparse.ArgumentParser) -> None:
    from runner.cli.maintainer import add_bisect_arguments

    add_bisect_arguments(p)
def _history_args(p: argparse.ArgumentParser) -> None:
    from runner.cli.history import add_history_arguments

    add_history_arguments(p)


def _regressions_args(p: argparse.ArgumentParser) -> None:
    from runner.cli.history import add_regressions_arguments

    add_regressions_arguments(p)


def _calibrate_args(p: argparse.ArgumentParser) -> None:
    from runner.cli.calibrate import add_arguments

    add_arguments(p)


def _dashboard_args(ds: argparse.ArgumentParser) -> None:
    ds.add_argument("--host", default="127.0.0.1")
    ds.add_argument("--port", type=int, default=8000)


#: Every subcommand, in ``--help`` order.
COMMANDS: tuple[Command, ...] = (
    Command("run", "run a campaign and print its tables", "runner.cli.campaign:cmd_run", _run_args),
    Command("resume", "finish the queued cells of an interrupted campaign", "runner.cli.campaign:cmd_resume",
            _id_format_args),
    Command("campaigns", "list campaigns", "runner.cli.read:cmd_campaigns", _campaigns_args),
    Command("show", "one campaign's figures and failures", "runner.cli.read:cmd_show", _show_args),
    Command("compare", "compare two servers (in a campaign) or two campaigns", "runner.cli.read:cmd_compare",
            _compare_args, description="A and B are each a campaign id (one-server campaign), ID:SERVER, or a "
                                       "SERVER label looked up in --campaign (default: the latest campaign)."),
    Command("profile", "a profiled cell's flame graphs, folded stacks and syscall table as files",
            "runner.cli.profile:cmd_profile", _profile_args,
            description="Writes cell-N.svg (interactive on-CPU flame graph), cell-N.folded, cell-N-syscalls.txt "
                        "and, when stored, cell-N-offcpu.svg and .folded. Needs inferno (make install)."),
    Command("export", "export a campaign's tables", "runner.cli.read:cmd_export", _export_args),
    Command("cancel", "cancel a queued or running campaign", "runner.cli.read:cmd_cancel", _cancel_args),
    Command("servers", "which servers can run here, and why not", "runner.cli.tools:cmd_servers", _servers_args),
    Command("selftest", "load generator vs the C reference receiver and the loopback limit, same run",
            "runner.cli.tools:cmd_selftest", _selftest_args),
    Command("worker", "claim and run queued campaigns (the compose worker service)", "runner.cli.tools:cmd_worker",
            _worker_args),
    Command("images", "container images: bootstrap the Debian base offline, build, list",
            "runner.cli.tools:cmd_images", _images_args),
    Command("compose-targets", "a campaign spec whose servers are compose/servers.yml's running services",
            "runner.cli.compose:cmd_compose_targets", _compose_targets_args,
            description="Prints a spec with one 'external' server per running service of the compose project "
                        "(published control port, server PID for memory sampling), the classic preset and "
                        "the load generator pinned away from the services' CPUs. FTP_PASSWORD must hold the "
                        "services' password."),
    Command("loadgen", "run one load phase from this host at a given time, print JSON (multi-host)",
            "runner.cli.tools:cmd_loadgen", _loadgen_args),
    Command("serve", "start one server on this host, driven over stdin (multi-host)", "runner.cli.tools:cmd_serve",
            _serve_args),
    Command("dashboard", "serve the web dashboard", "runner.cli.tools:cmd_dashboard", _dashboard_args),
    Command("history", "one series by campaign or by server commit, or the list of series",
            "runner.cli.history:cmd_history", _history_args),
    Command("regressions", "significant changes of every series, and what moved in the environment",
            "runner.cli.history:cmd_regressions", _regressions_args),
    Command("calibrate", "A/A calibration: one build against itself N times; noise floor, false-alarm rate",
            "runner.cli.calibrate:cmd_calibrate", _calibrate_args),
    Command("db", "print the database URL in use (migrating it)", "runner.cli.tools:cmd_db"),
    Command("check", "run a spec at a candidate and a baseline ref, exit 1 on a significant regression",
            "runner.cli.maintainer:cmd_check", _check_args,
            description="The spec's servers with 'source' are built at --candidate (a ref, or a checkout "
                        "directory as it is) and at --baseline (a ref, or a stored campaign id: its samples are "
                        "reused); each workload's row metric is compared (Mann-Whitney U plus a minimum "
                        "effect). Writes a Markdown summary and JUnit XML for CI."),
    Command("bisect", "find the first commit where a figure regressed (git's bisect order)",
            "runner.cli.maintainer:cmd_bisect", _bisect_args,
            description="Measures --good and --bad, then the commits `git rev-list --bisect` names, each a "
                        "stored campaign, until one commit is left; re-measures it and its parent to confirm."),
    Command("bisect-cancel", "cancel a queued or running bisect of the dashboard",
            "runner.cli.maintainer:cmd_bisect_cancel", _cancel_args,
            description="A queued bisect is never started; of a running one the step's campaign is cancelled "
                        "(the cell in flight finishes and is stored) and its worker stops the bisect."),
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argparse parser of the ``xferlab`` command, one subparser per :data:`COMMANDS`
    entry. ``only``: the name of the one command whose arguments are added (every command
    is still listed, with its help line; a name that is no command adds none), so that
    parsing one command does not import what the others' arguments are built from (the
    Docker SDK for ``images``); None adds every command's arguments."""
    p = argparse.ArgumentParser(prog="xferlab", description="Benchmark lab for file-transfer servers.")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)
    for cmd in COMMANDS:
        sp = sub.add_parser(cmd.name, help=cmd.help, description=cmd.description)
        if cmd.arguments is not None and only in (None, cmd.name):
            cmd.arguments(sp)
        sp.set_defaults(handler=cmd.handler)
    return p


def _handler(ref: str) -> Callable[[argparse.Namespace], int]:
    module, _, func = ref.partition(":")
    fn: Callable[[argparse.Namespace], int] = getattr(import_module(module), func)
    return fn


#: Commands whose arguments after the command name go verbatim to a script with its own
#: parser (``xferlab selftest --quick``): argparse's REMAINDER cannot start with an option.
PASS_THROUGH = ("selftest",)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed by :func:`build_parser` with the arguments of the command it names
    (its first word that is not an option; none when there is none); for a
    :data:`PASS_THROUGH` command, what follows its name is ``args.rest`` as given. Exits 2
    (argparse) on bad arguments."""
    at = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    p = build_parser(only=argv[at] if at is not None else "")
    if at is not None and argv[at] in PASS_THROUGH:
        args = p.parse_args(argv[:at + 1])
        args.rest = argv[at + 1:]
        return args
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``xferlab`` console script. Returns the exit status."""
    import warnings

    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    from runner.spec.redaction import install_log_filter

    install_log_filter()  # campaigns' secrets and URL passwords never reach the log (runner.campaign.loop adds them)
    from runner.spec.model import SpecError
    from runner.store.db import DatabaseError

    try:
        return _handler(args.handler)(args)
    except (CliError, SpecError, DatabaseError) as exc:
        print(f"xferlab: error: {exc}", file=sys.stderr)
        return 2
