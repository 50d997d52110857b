"""Flame graphs of folded stacks, drawn by inferno (the Rust port of Brendan Gregg's
FlameGraph tools; ``make install`` builds it into ``.venv/bin``).

- :func:`flamegraph_svg`: folded stacks -> an interactive SVG (``inferno-flamegraph``):
  click a frame to zoom to it, Ctrl-F (or the "Search" button) to highlight frames
  matching a regular expression, hover a frame for its samples and share of the total.
- :func:`diff_svg`: two folded profiles -> a differential flame graph
  (``inferno-diff-folded --normalize``, then ``inferno-flamegraph``): the shape is the
  second profile's; a frame is red where its share grew from the first to the second,
  blue where it shrank, the deeper the colour the larger the change (Gregg,
  "Differential Flame Graphs", 2014). ``--normalize`` scales the first profile's
  counts so that both have the same total, so shares, not sample counts, are compared.

Frames and titles reach inferno as data on stdin and ``--title=`` arguments (never
through a shell); inferno escapes them in the SVG. The SVG carries its own inline
script: serve it as its own document (docs/dashboard.md, "Flame graphs").
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Seconds one inferno run may take (a few thousand stacks take milliseconds).
TIMEOUT_S = 60
#: The inferno release scripts/install.sh builds.
INFERNO_VERSION = "0.12.8"


class InfernoMissing(RuntimeError):
    """An inferno program is not installed (the message names it and ``make install``)."""


def inferno_tool(name: str) -> str:
    """The path of inferno's program ``name`` (e.g. ``inferno-flamegraph``): beside the
    running Python first (``.venv/bin``, where ``make install`` puts it), then on PATH.
    Raises InfernoMissing naming the program and the fix."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found:
        return found
    raise InfernoMissing(f"{name} is not installed: run `make install` (scripts/install.sh builds inferno "
                         f"{INFERNO_VERSION} into .venv/bin with cargo)")


def folded_total(folded: str) -> int:
    """The sum of the counts of folded stacks (``frame;frame;... N`` lines; blank lines and
    lines without a trailing integer are ignored)."""
    total = 0
    for line in folded.splitlines():
        head, _, n = line.rstrip().rpartition(" ")
        if head and n.isdigit():
            total += int(n)
    return total


def _run(argv: list[str], stdin: str) -> str:
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if p.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return p.stdout


def flamegraph_svg(folded: str, *, title: str, subtitle: str = "", count_name: str = "samples",
                   colors: str = "hot", width: int = 1200) -> str:
    """An interactive flame graph (SVG text) of ``folded`` stacks.

    Args:
        folded: folded stacks, one ``frame;frame;... N`` line per stack.
        title: the graph's title; ``subtitle`` a second line (both plain text).
        count_name: what a count is, shown on hover (``samples``, ``us``).
        colors: inferno palette (``hot`` for CPU, ``io`` for off-CPU time, ...).
        width: image width in pixels.
    Raises: InfernoMissing; ValueError when ``folded`` holds no sample; RuntimeError
        when inferno fails (its last error line)."""
    if folded_total(folded) <= 0:
        raise ValueError("no samples in the folded stacks: nothing to draw")
    argv = [inferno_tool("inferno-flamegraph"), f"--title={title}", f"--countname={count_name}",
            f"--colors={colors}", f"--width={int(width)}", "--hash"]
    if subtitle:
        argv.append(f"--subtitle={subtitle}")
    return _run(argv, folded)


def diff_folded(before: str, after: str) -> str:
    """``inferno-diff-folded --normalize`` of two folded profiles: lines ``stack N1 N2``,
    N1 the first profile's count scaled to the second's total. Raises InfernoMissing,
    ValueError when either profile holds no sample, RuntimeError when inferno fails."""
    if folded_total(before) <= 0 or folded_total(after) <= 0:
        raise ValueError("a differential flame graph needs samples on both sides")
    tool = inferno_tool("inferno-diff-folded")
    with tempfile.TemporaryDirectory(prefix="xferlab-diff-") as d:
        a, b = Path(d) / "before.folded", Path(d) / "after.folded"
        a.write_text(before)
        b.write_text(after)
        return _run([tool, "--normalize", str(a), str(b)], "")


def diff_svg(before: str, after: str, *, title: str, subtitle: str = "", width: int = 1200) -> str:
    """The differential flame graph (SVG text) from ``before`` to ``after`` folded stacks
    (module docstring): frames sized by ``after``, red where their share grew, blue where
    it shrank. Hovering a frame shows its samples, share and change in percentage points.
    Raises as :func:`diff_folded` and :func:`flamegraph_svg`."""
    diffed = diff_folded(before, after)
    argv = [inferno_tool("inferno-flamegraph"), f"--title={title}", f"--width={int(width)}"]
    if subtitle:
        argv.append(f"--subtitle={subtitle}")
    return _run(argv, diffed)
