"""Run-queue wait of a process: the time its threads were runnable but waiting for a CPU.

A process's CPU time (``os.times()``, rusage) counts only the time it ran. A client that
shares its CPU with other runnable work is starved without using more CPU: the time the
scheduler kept it waiting is missing from its CPU time. The kernel counts that time per
thread in ``/proc/PID/task/TID/schedstat`` (Documentation/scheduler/sched-stats.rst,
"/proc/<pid>/schedstat": three fields, time spent on the CPU in ns, time spent waiting on
a run queue in ns, timeslices run), kept whenever the kernel has ``CONFIG_SCHED_INFO``
(no ``kernel.sched_schedstats`` switch needed).

The machine's CPU pressure (:func:`cpu_pressure_us`) is the same wait seen from the whole
machine: Linux PSI (pressure stall information, Documentation/accounting/psi.rst),
``/proc/pressure/cpu`` line ``some ... total=T``: T microseconds in which at least one
runnable task waited for a CPU (``CONFIG_PSI``). Over a phase it says how much of the
phase the machine had more runnable work than CPUs, whoever's work it was: on a machine
shared with other jobs, CPU time a server or client did not get.

Used by xferlab's own clients (runner.load.ftp.phase, runner.load.http.client) over their
measured phase: ``wait_s / wall_s`` is the ``client_cpu`` stat ``runqueue_wait``
(docs/methodology.md, "Client cost"), and CPU share + run-queue share near 1 means the
client was runnable (running or waiting to run) for the whole phase.
"""
from __future__ import annotations

import os

#: Nanoseconds per second.
NS = 1_000_000_000


def thread_waits(pid: int | None = None) -> dict[int, int] | None:
    """``{thread id: ns waited on a run queue since the thread started}`` for every thread
    of process ``pid`` (None: this process), field 2 of each
    ``/proc/PID/task/TID/schedstat``. A thread that exits while it is read is left out.

    Returns None when the process has gone or the kernel keeps no schedstat (no
    ``CONFIG_SCHED_INFO``): not measured, never 0."""
    base = f"/proc/{pid if pid is not None else 'self'}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return None
    out: dict[int, int] = {}
    for tid in tids:
        try:
            with open(f"{base}/{tid}/schedstat", encoding="ascii") as f:
                fields = f.read().split()
        except (FileNotFoundError, ProcessLookupError):
            continue  # the thread exited between listdir and open
        except OSError:
            return None
        if len(fields) < 2:
            return None
        out[int(tid)] = int(fields[1])
    return out or None


#: The machine-wide CPU pressure file (Linux PSI).
PSI_CPU = "/proc/pressure/cpu"


def cpu_pressure_us(path: str = PSI_CPU) -> int | None:
    """Microseconds since boot in which at least one runnable task of the machine waited
    for a CPU: the ``total`` of the ``some`` line of ``path`` (module docstring). None when
    the kernel has no PSI (no file, ``psi=0``) or the line is not there: not measured,
    never 0."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] == "some":
                    for kv in fields[1:]:
                        if kv.startswith("total="):
                            return int(kv[len("total="):])
    except (OSError, ValueError):
        return None
    return None


def waited_s(before: dict[int, int] | None, after: dict[int, int] | None) -> float | None:
    """Seconds the process's threads waited on a run queue between two
    :func:`thread_waits` readings: the sum over the threads alive at ``after`` of their
    growth since ``before`` (a thread born in between counts from 0). A thread that exited
    in between is not counted (its last figure is gone with it): the result is a lower
    bound, exact for the single-threaded asyncio clients. Threads waiting at once add up,
    so for N threads the figure can exceed the wall time. None when either reading is
    None."""
    if before is None or after is None:
        return None
    return sum(max(ns - before.get(tid, 0), 0) for tid, ns in after.items()) / NS
