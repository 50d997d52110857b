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

On a virtual machine the hypervisor may run something else while a virtual CPU has work:
steal time (:func:`cpu_steal_s`, the ``steal`` column of ``/proc/stat``, proc(5)). Time
stolen while a task waits on a run queue is in its run delay (measured on the run queue's
clock, which steal does not stop); time stolen while it is the running task is in neither
its CPU time (the scheduler's task clock and the tick accounting both leave steal out) nor
its run delay, so a starved client on such a machine reads CPU + wait below 1 by about its
CPU share x steal / (1 - steal) (:func:`saturation`).

Used by xferlab's own clients (runner.load.ftp.phase, runner.load.http.client) over their
measured phase: ``wait_s / wall_s`` is the ``client_cpu`` stat ``runqueue_wait``
(docs/methodology.md, "Client cost"), and CPU share + run-queue share near 1 means the
client was runnable (running or waiting to run) for the whole phase.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TypeGuard

#: Nanoseconds per second.
NS = 1_000_000_000
#: The kernel's CPU accounting file (proc(5)).
PROC_STAT = "/proc/stat"


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


def cpu_steal_s(cpus: Iterable[int] | None = None, path: str = PROC_STAT) -> float | None:
    """Seconds since boot in which the hypervisor ran something else while one of the
    virtual CPUs ``cpus`` (CPU numbers; None: those this process may run on,
    ``os.sched_getaffinity``) had work, summed over them: the 8th value (``steal``) of each
    ``cpuN`` line of ``path`` (proc(5)), in USER_HZ ticks (``SC_CLK_TCK``, 10 ms at 100).
    0.0 on bare metal and on kernels that do not account steal. None when the file cannot
    be read or a CPU's line is missing or short (an offline CPU): not measured, never 0."""
    want = {f"cpu{c}" for c in (os.sched_getaffinity(0) if cpus is None else cpus)}
    ticks = 0
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] in want:
                    if len(fields) < 9:
                        return None
                    ticks += int(fields[8])
                    want.discard(fields[0])
    except (OSError, ValueError):
        return None
    if want:
        return None
    return ticks / os.sysconf("SC_CLK_TCK")


def steal_share(before: float | None, after: float | None, wall_s: float, cpus: int) -> float | None:
    """The share of ``cpus`` virtual CPUs' time the hypervisor stole over ``wall_s`` seconds,
    from two :func:`cpu_steal_s` readings: (after - before) / (wall_s x cpus), between 0
    and 1. None when either reading is None or ``wall_s`` or ``cpus`` is not positive."""
    if before is None or after is None or wall_s <= 0 or cpus <= 0:
        return None
    return min(max((after - before) / (wall_s * cpus), 0.0), 1.0)


#: The highest steal share :func:`saturation` scales by (a CPU stolen more than this is
#: not a machine a figure can be read from; the cap keeps the quotient finite).
MAX_STEAL_SHARE = 0.5


def saturation(util: float, wait: float | None, steal: float | None = None) -> float:
    """The share of a phase a load generator was runnable, from its CPU share ``util``
    (CPU s / wall s), its run-queue share ``wait`` (None: not measured, 0) and the steal
    share of its CPUs ``steal`` (None: not measured, 0; capped at
    :data:`MAX_STEAL_SHARE`): ``util / (1 - steal) + wait``.

    Method: while the client is the running task of a virtual CPU the hypervisor takes
    ``steal`` of that CPU's time, which counts neither as its CPU time nor as its run-queue
    wait (module docstring); its CPU seconds are the ``1 - steal`` the host gave it,
    so the time it held the CPU is ``util / (1 - steal)``. Time stolen while it waited is
    already in ``wait``. E.g. 0.45 on the CPU and 0.47 waiting with 10% steal: 0.97."""
    s = min(max(steal or 0.0, 0.0), MAX_STEAL_SHARE)
    return util / (1.0 - s) + (wait or 0.0)


#: The :func:`saturation` at or above which a load generator is flagged client-bound: it
#: was runnable 90% of the phase, so the figure may be the client's limit, not the
#: server's (seed 003's rule for a client near a full core, with the run-queue wait and
#: the stolen time counted as the time it wanted a CPU).
CLIENT_BOUND = 0.90


def client_bound(util: float, wait: float | None, steal: float | None = None) -> bool:
    """True when :func:`saturation` of ``util``, ``wait``, ``steal`` (shares, as there)
    reaches :data:`CLIENT_BOUND`."""
    return saturation(util, wait, steal) >= CLIENT_BOUND


def steal_shown(steal: float | None) -> TypeGuard[float]:
    """True when a steal share ``steal`` (ratio, None: not measured) is worth printing
    beside a client's CPU figure: it rounds to 1% or more."""
    return steal is not None and round(steal * 100) >= 1
