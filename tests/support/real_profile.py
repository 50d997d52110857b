"""A real CPU profile for the tests: a small C program runs busy under ``perf record``.

The program (``busy.c`` below, built with frame pointers) spends its time in two
functions of its own, ``xfl_hash_block`` (pure computation) and ``xfl_copy_block``
(``memcpy`` then ``write(2)`` of the block to /dev/null, so kernel frames show), in
the ratio its mode asks: ``a`` hashes 4 blocks for each copy, ``b`` copies 4 blocks
for each hash. It prints how many ``write`` calls it made: the independent reference
of the syscall table, which ``perf stat`` counts from the kernel's tracepoints.

``perf record -F RATE -g -e cpu-clock`` samples it (the event this VM exposes), and
inferno's ``inferno-collapse-perf`` folds ``perf script``'s output into folded stacks.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runner.metrics.profile_data import ServerProfile, SyscallRow

BUSY_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned char src[65536], dst[65536];
static unsigned long writes;

__attribute__((noinline)) unsigned long xfl_hash_block(unsigned long h) {
    for (int i = 0; i < (int)sizeof src; i++) h = (h ^ src[i]) * 1099511628211UL;
    return h;
}

__attribute__((noinline)) void xfl_copy_block(int fd) {
    for (int k = 0; k < 4; k++) memcpy(dst, src, sizeof src);
    if (write(fd, dst, sizeof dst) > 0) writes++;
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
    int fd = open("/dev/null", O_WRONLY);
    for (int i = 0; i < (int)sizeof src; i++) src[i] = (unsigned char)(i * 7);
    unsigned long h = xfl_work(argv[1][0], atof(argv[2]), fd);
    printf("writes %lu hash %lu\n", writes, h & 1);
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
    """Compile the busy program into ``workdir`` (gcc, ``-O1 -fno-omit-frame-pointer``)."""
    src = workdir / "busy.c"
    src.write_text(BUSY_C)
    exe = workdir / "xfl-busy"
    subprocess.run([_need("gcc"), "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(exe), str(src)], check=True,
                   timeout=60)
    return exe


def perf_version() -> str:
    """``perf --version``'s version, e.g. ``6.1.187``."""
    out = subprocess.run([_need("perf"), "--version"], capture_output=True, text=True, check=True, timeout=10).stdout
    return out.split()[-1]


def record(workdir: Path, mode: str, *, seconds: float = 1.5, rate: int = 199) -> tuple[ServerProfile, int]:
    """Profile one run of the busy program in ``mode`` (``a`` or ``b``).

    Returns ``(profile, writes)``: the ServerProfile (on-CPU folded stacks from perf's
    samples, the ``write`` count from ``perf stat``'s tracepoint) and the program's own
    count of its writes."""
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
    writes = int(re.search(r"writes (\d+)", run.stdout).group(1))  # type: ignore[union-attr]
    script = subprocess.run([perf, "script", "-i", str(data)], capture_output=True, text=True, check=True,
                            timeout=120).stdout
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
    return profile, writes
