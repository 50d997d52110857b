"""``xferlab profile CELL_ID``: a cell's flame graphs, folded stacks and syscall table as
files; and the differential flame graphs of ``xferlab compare A B --profile``."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from runner.cli import common
from runner.cli.common import CliError


def _outdir(path: str) -> Path:
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"-o {path}: cannot create the folder: {exc.strerror}") from None
    return out


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    print(f"wrote {path} ({len(text.encode())} bytes)", file=sys.stderr)


def cmd_profile(args: argparse.Namespace) -> int:
    """Write ``cell-N.folded`` and ``cell-N.svg`` (on-CPU), ``cell-N-offcpu.folded`` and
    ``cell-N-offcpu.svg`` when off-CPU stacks were stored, and ``cell-N-syscalls.txt``
    into ``-o DIR``. Exit 2 naming the cell when it has no profile, or naming
    ``make install`` when inferno is missing."""
    from runner.report.flamegraph import InfernoMissing, flamegraph_svg, folded_total
    from runner.report.profiles import profiler_text, syscall_text
    from runner.report.reader import load_cell_profile

    with common.session(common.engine()) as session:
        try:
            p = load_cell_profile(session, cell_id=args.cell_id)
        except LookupError as exc:
            raise CliError(str(exc)) from None
    out = _outdir(args.output)
    stem = f"cell-{p.cell_id}"
    sub = (f"{profiler_text(p)} at {p.rate_hz} Hz over {p.duration_s:.2f} s; "
           f"on-CPU {p.on_cpu_s:.3f} s ({folded_total(p.on_cpu)} samples)")
    _write(out / f"{stem}.folded", p.on_cpu)
    _write(out / f"{stem}-syscalls.txt", syscall_text(p))
    try:
        if folded_total(p.on_cpu) > 0:
            _write(out / f"{stem}.svg", flamegraph_svg(p.on_cpu, title=f"{p.server} · {p.title}: on-CPU",
                                                       subtitle=sub))
        else:
            print(f"cell {p.cell_id}: no on-CPU samples: no flame graph drawn", file=sys.stderr)
        if p.off_cpu and folded_total(p.off_cpu) > 0:
            _write(out / f"{stem}-offcpu.folded", p.off_cpu)
            _write(out / f"{stem}-offcpu.svg", flamegraph_svg(
                p.off_cpu, title=f"{p.server} · {p.title}: off-CPU", count_name="us", colors="io",
                subtitle=f"blocked {p.off_cpu_s or 0:.3f} s"))
    except InfernoMissing as exc:
        raise CliError(str(exc)) from None
    return 0


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "x"


def write_compare_profiles(args: argparse.Namespace) -> None:
    """``compare A B --profile``: one differential flame graph per workload and parameter set
    profiled on both sides (runner.report.profile_pairs), ``profile-diff-WORKLOAD-N.svg``
    into ``--profile-dir``; prints each pair's cells and sample counts to stderr. Raises
    CliError when nothing was profiled on both sides or inferno is missing."""
    from runner.report.flamegraph import InfernoMissing, diff_svg
    from runner.report.profile_pairs import profile_pairs
    from runner.report.render import CompareError

    with common.session(common.engine()) as session:
        try:
            pairs = profile_pairs(session, args.a, args.b, campaign=args.campaign)
        except CompareError as exc:
            raise CliError(str(exc)) from None
    if not pairs:
        raise CliError(f"--profile: no workload of {args.a!r} and {args.b!r} was profiled on both sides "
                       "(`xferlab run --profile`)")
    out = _outdir(args.profile_dir)
    for i, pr in enumerate(pairs, 1):
        title = f"{pr.title}: {pr.a} -> {pr.b}"
        sub = (f"red: share grew, blue: shrank; {pr.a}: {pr.a_samples} samples (cells "
               f"{', '.join(map(str, pr.a_cells))}) scaled to {pr.b}: {pr.b_samples} (cells "
               f"{', '.join(map(str, pr.b_cells))})")
        try:
            svg = diff_svg(pr.a_folded, pr.b_folded, title=title, subtitle=sub)
        except InfernoMissing as exc:
            raise CliError(str(exc)) from None
        _write(out / f"profile-diff-{_slug(pr.workload)}-{i}.svg", svg)
        print(f"{pr.title}: {pr.a} {pr.a_samples} samples vs {pr.b} {pr.b_samples} samples", file=sys.stderr)
