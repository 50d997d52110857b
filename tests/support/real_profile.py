"""A real CPU profile for the tests: a small C program runs busy under ``perf record``.

The program (``busy.c`` below, built at ``-O0`` so that every function of its own keeps
its frame pointer and perf's frame-pointer unwinding sees it) spends its time in two
functions, ``xfl_hash_block`` (pure computation) and ``xfl_copy_block`` (a byte copy,
then four ``write(2)`` of the block at offset 0 of an unnamed file in /tmp, ``O_TMPFILE``: the
kernel copies it into the page cache, so kernel frames show, where a write to /dev/null
costs the kernel too little for a 1.5 s profile to catch it every time), in
the ratio its mode asks: ``a`` hashes 4 blocks for each copy, ``b`` copies 4 blocks
for each hash. It prints how many ``write`` calls it made: the independent reference
of the syscall table, which ``perf stat`` counts from the kernel's tracepoints.

``perf record -F RATE -g -e cpu-clock`` samples it (the event this VM exposes), and
inferno's ``inferno-collapse-perf`` folds ``perf script``'s output into folded stacks
(``perf script`` without the period field, so that each sample counts 1).
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from runner.metrics.profile_data import ServerProfile, SyscallRow

BUSY_C = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static unsigned char src[65536], dst[65536];
static unsigned long writes;

__attribute__((noinline)) unsigned long xfl_hash_block(unsigned long h) {
    for (int i = 0; i < (int)sizeof src; i++) h = (h ^ src[i]) * 1099511628211UL;
    return h;
}

__attribute__((noinline)) void xfl_copy_block(int fd) {
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < (int)sizeof src; i++) dst[i] = src[i] ^ (unsigned char)k;
    for (int j = 0; j < 4; j++) {
        lseek(fd, 0, SEEK_SET);
        if (write(fd, dst, sizeof dst) > 0) writes++;
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long xfl_work(char mode, double seconds, int fd) {
    unsigned long h = 1469598103934665603UL;
    double end = now() + seconds;
    while (now() < end) {
        int hashes = mode == 'a' ? 4 : 1, copies = mode == 'a' ? 1 : 4;
        for (int i = 0; i < hashes; i++) h = xfl_hash_block(h);
        for (int i = 0; i < copies; i++) xfl_copy_block(fd);
    }
    return h;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int fd = open("/tmp", O_TMPFILE | O_WRONLY, 0600);
    if (fd < 0) return 3;
    for (int i = 0; i < (int)sizeof src; i++) src[i] = (unsigned char)(i * 7);
    unsigned long h = xfl_work(argv[1][0], atof(argv[2]), fd);
    struct timespec cpu;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    printf("writes %lu hash %lu cpu %ld.%09ld\n", writes, h & 1, (long)cpu.tv_sec, cpu.tv_nsec);
    return 0;
}
"""

#: The program's own frames, root to leaf.
FRAMES = ("main", "xfl_work", "xfl_hash_block", "xfl_copy_block")


def _need(tool: str) -> str:
    path = shutil.which(tool) or (str(Path(sys.executable).parent / tool)
                                  if (Path(sys.executable).parent / tool).exists() else None)
    if path is None:
        pytest.skip(f"{tool} is not installed (make install: linux-perf and inferno)")
    return path


def build_busy(workdir: Path) -> Path:
    """Compile the busy program into ``workdir`` (gcc, ``-O0 -fno-omit-frame-pointer``)."""
    src = workdir / "busy.c"
    src.write_text(BUSY_C)
    exe = workdir / "xfl-busy"
    subprocess.run([_need("gcc"), "-O0", "-g", "-fno-omit-frame-pointer", "-o", str(exe), str(src)], check=True,
                   timeout=60)
    return exe


def perf_version() -> str:
    """``perf --version``'s version, e.g. ``6.1.187``."""
    out = subprocess.run([_need("perf"), "--version"], capture_output=True, text=True, check=True, timeout=10).stdout
    return out.split()[-1]


class Recorded(NamedTuple):
    """One profiled run of the busy program: the ServerProfile (on-CPU folded stacks from
    perf's samples, the ``write`` count from ``perf stat``'s tracepoint), the program's own
    count of its writes and its own CPU time in seconds (CLOCK_PROCESS_CPUTIME_ID)."""

    profile: ServerProfile
    writes: int
    cpu_s: float


def record(workdir: Path, mode: str, *, seconds: float = 1.5, rate: int = 199) -> Recorded:
    """Profile one run of the busy program in ``mode`` (``a`` or ``b``) for ``seconds`` of
    wall time; returns what it recorded (:class:`Recorded`)."""
    exe = workdir / "xfl-busy"
    if not exe.exists():
        build_busy(workdir)
    perf = _need("perf")
    collapse = _need("inferno-collapse-perf")
    data, stat = workdir / f"perf-{mode}.data", workdir / f"stat-{mode}.txt"
    # perf stat inside perf record: it counts the program's writes only, not perf record's own
    run = subprocess.run([perf, "record", "-q", "-F", str(rate), "-g", "-e", "cpu-clock", "-o", str(data), "--",
                          perf, "stat", "-x", ",", "-o", str(stat), "-e", "syscalls:sys_enter_write", "--",
                          str(exe), mode, str(seconds)],
                         capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        pytest.fail(f"perf failed ({run.returncode}): {run.stderr[-2000:]}")
    own = re.search(r"writes (\d+) hash \d+ cpu ([\d.]+)", run.stdout)
    if own is None:
        pytest.fail(f"the busy program printed no counts: {run.stdout[-500:]!r}")
    writes, cpu_s = int(own.group(1)), float(own.group(2))
    script = subprocess.run([perf, "script", "-F", "comm,tid,time,event,ip,sym,dso", "-i", str(data)],
                            capture_output=True, text=True, check=True, timeout=120).stdout
    folded = subprocess.run([collapse, "--all"], input=script, capture_output=True, text=True, check=True,
                            timeout=120).stdout
    samples = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines() if line.strip())
    counted = 0
    for line in stat.read_text().splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2] == "syscalls:sys_enter_write" and fields[0].isdigit():
            counted = int(fields[0])
    profile = ServerProfile(profiler="perf", profiler_version=perf_version(), rate_hz=rate, duration_s=seconds,
                            on_cpu=folded, on_cpu_s=samples / rate,
                            syscalls=(SyscallRow(name="write", count=counted),),
                            notes=("no off-CPU stacks in this test profile",))
    return Recorded(profile, writes, cpu_s)


#: The environment snapshot stored with the test cells (the fields of an environment class).
TEST_ENVIRONMENT = {"kernel": "test", "cpu_model": "test", "cores": 2, "sysctls": {}, "backend": "local"}


def store_profiled_campaign(engine, profiles: dict[str, ServerProfile | None], *, name: str = "profiled",
                            workload: str = "login", clients: int = 4,
                            elapsed: list[float] | None = None) -> tuple[int, dict[str, int]]:
    """A campaign with ``len(elapsed)`` (default 1) ``done`` cells per server label of
    ``profiles`` (a pyftpdlib server each, ``workload`` with ``clients`` clients), each cell
    stored as a run stores it: a CellOutcome (runner.cell.outcome) with its ``elapsed``
    sample (seconds, one per repeat) and the label's profile (None: not profiled), through
    runner.campaign.loop's store step.

    Returns ``(campaign id, {label: id of its first cell})``."""
    from sqlalchemy.orm import Session

    from runner.campaign.loop import _store
    from runner.cell.outcome import CellOutcome
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample

    elapsed = elapsed or [1.0]
    spec = parse_spec({"name": name, "repeats": len(elapsed), "backend": "local",
                       "servers": [{"name": "pyftpdlib", "version": "2.2.0", "label": label} for label in profiles],
                       "workloads": [{"name": workload, "params": {"clients": clients}}]})
    ids = {}
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        for c in s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq):
            c.status, c.started_at = "running", crud.now()
            s.commit()
            value = elapsed[c.repeat]
            outcome = CellOutcome("done", samples=[Sample(metric="elapsed", stat="value", value=value, unit="s")],
                                  summary="test", environment=dict(TEST_ENVIRONMENT),
                                  profile=profiles[c.server_label])
            _store(s, c, outcome, spec, None, {}, crud.RecordCache())  # type: ignore[arg-type]  # environment given
            ids.setdefault(c.server_label, c.id)
        return camp.id, ids


_TITLE_RE = re.compile(r"^(?P<name>.*) \((?P<n>[\d,]+) (?:samples|us), (?P<pct>[\d.]+)%"
                       r"(?:; (?P<delta>[+-][\d.]+)%)?\)$")


def svg_frames(svg: str) -> list[dict]:
    """The frames of an inferno SVG, parsed as XML (raises ParseError when it is not):
    ``[{"name", "samples", "pct", "delta" (percentage points, None outside a differential
    graph), "fill" (the rect's colour), "x", "width" (the rect's, in percent or pixels
    as drawn)}]``, from each ``<g>`` holding a ``<title>`` and a ``<rect>``."""
    import xml.etree.ElementTree as ET

    ns = "{http://www.w3.org/2000/svg}"
    root = ET.fromstring(svg.encode())
    out = []
    for g in root.iter(f"{ns}g"):
        title, rect = g.find(f"{ns}title"), g.find(f"{ns}rect")
        if title is None or rect is None or title.text is None:
            continue
        m = _TITLE_RE.match(title.text)
        if m is None:
            continue
        out.append({"name": m["name"], "samples": int(m["n"].replace(",", "")), "pct": float(m["pct"]),
                    "delta": None if m["delta"] is None else float(m["delta"]), "fill": rect.get("fill"),
                    "x": rect.get("x"), "width": rect.get("width")})
    return out


def frame_samples(folded: str, frame: str) -> tuple[int, int]:
    """``(samples whose stack holds ``frame``, all samples)`` of folded stacks: the
    independent reference of a flame graph's frame width."""
    total = hit = 0
    for line in folded.splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        total += int(n)
        hit += int(n) if frame in stack.split(";") else 0
    return hit, total
