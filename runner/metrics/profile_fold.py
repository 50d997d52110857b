"""Turning the profilers' output into folded stacks and a syscall table.

Inputs (all text):

* ``perf script -F comm,tid,time,event,trace,ip,sym,dso`` of a ``perf record`` holding
  ``cpu-clock`` samples with call chains, ``sched:sched_switch`` samples of the server's
  cgroup with call chains (its threads going off CPU) and ``sched:sched_switch`` samples
  without call chains from every CPU (the switch back in). A sample is a header line
  ``COMM TID TIME: EVENT: [TRACE]``; a sample with a call chain is followed by one
  tab-indented line per frame, leaf first, ``ADDR SYMBOL+0xOFF (DSO)``; one without a call
  chain has its single ``ADDR SYMBOL (DSO)`` on the header line.
* ``py-spy record --format raw``: already folded, one ``frame;frame;... N`` line per stack,
  the root frame ``process PID:"COMMAND LINE"``.
* ``raw_syscalls:sys_enter`` (``NR N (ARGS)``) and ``raw_syscalls:sys_exit`` (``NR N = RET``)
  samples in the same ``perf script`` output, without call chains.

Folded stacks are Brendan Gregg's format (``root;...;leaf COUNT``), kernel frames
prefixed ``[k] ``, frames without a symbol written ``[DSO]`` (the binary's base name).
"""
from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass

_HEADER = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<tid>\d+)\s+(?P<time>\d+\.\d+):\s+(?:\d+\s+)?(?P<event>\S+?):(?:\s|$)"
                     r"\s*(?P<rest>.*)$")
_FRAME = re.compile(r"^\s*(?P<addr>[0-9a-f]+)\s+(?P<sym>.*?)\s+\((?P<dso>[^()]*)\)\s*$")
_OFFSET = re.compile(r"\+0x[0-9a-f]+$")
_SWITCH = re.compile(r"prev_pid=(?P<prev>\d+) .*?prev_state=(?P<state>\S+) ==> .*?next_pid=(?P<next>\d+)")
_PYSPY_ROOT = re.compile(r'^process (?P<pid>\d+):".*"$')


@dataclass
class Sample:
    """One ``perf script`` sample: ``comm``, ``tid``, ``time`` (s, the trace clock),
    ``event`` name, ``rest`` (the tracepoint's fields, ``""`` for cpu-clock), ``frames``
    (leaf first, folded names; empty without a call chain)."""

    comm: str
    tid: int
    time: float
    event: str
    rest: str
    frames: list[str]
    chained: bool


def frame_name(sym: str, dso: str) -> str:
    """A frame's name in folded stacks: the symbol without its ``+0xOFF``, ``[k] `` before a
    kernel symbol, ``[DSO]`` (base name) when perf found no symbol."""
    kernel = dso.startswith("[kernel")
    sym = _OFFSET.sub("", sym.strip())
    if not sym or sym == "[unknown]":
        base = os.path.basename(dso) if dso and dso != "[unknown]" else "unknown"
        return f"[{base.strip('[]')}]"
    sym = sym.replace(";", ":")
    return f"[k] {sym}" if kernel else sym


def parse_perf_script(text: str) -> list[Sample]:
    """The samples of ``perf script`` output (format in the module docstring); lines that
    are neither a header nor a frame are skipped."""
    out: list[Sample] = []
    cur: Sample | None = None
    for line in text.splitlines():
        if line.startswith("\t"):
            if cur is not None:
                m = _FRAME.match(line)
                if m:
                    cur.frames.append(frame_name(m["sym"], m["dso"]))
                    cur.chained = True
            continue
        m = _HEADER.match(line)
        if not m:
            continue
        cur = Sample(m["comm"].strip().replace(";", ":") or "?", int(m["tid"]), float(m["time"]), m["event"],
                     m["rest"], [], False)
        out.append(cur)
    return out


def fold(stacks: Counter[tuple[str, ...]]) -> str:
    """Folded text of ``stacks`` (root-first frame tuples -> weight), heaviest first, one
    ``a;b;c N`` line each, ending with a newline ("" when empty)."""
    lines = [f"{';'.join(k)} {v}" for k, v in sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0])) if v > 0]
    return "\n".join(lines) + ("\n" if lines else "")


@dataclass(frozen=True)
class OnCpu:
    """Folded on-CPU stacks: ``folded`` text, ``samples`` counted, ``unresolved``: samples
    with at least one frame without a symbol, ``unresolved_dsos``: those frames' binaries."""

    folded: str
    samples: int
    unresolved: int
    unresolved_dsos: tuple[str, ...]


def on_cpu_stacks(samples: list[Sample], event: str = "cpu-clock") -> OnCpu:
    """Fold the ``event`` samples, root (the process name) first."""
    stacks: Counter[tuple[str, ...]] = Counter()
    unresolved = 0
    dsos: set[str] = set()
    n = 0
    for s in samples:
        if not s.event.startswith(event):
            continue
        n += 1
        frames = (s.comm, *reversed(s.frames))
        bad = [f for f in s.frames if f.startswith("[") and not f.startswith("[k] ")]
        if bad:
            unresolved += 1
            dsos.update(bad)
        stacks[frames] += 1
    return OnCpu(fold(stacks), n, unresolved, tuple(sorted(dsos)))


@dataclass(frozen=True)
class OffCpu:
    """Off-CPU time of the server's threads: ``folded`` (weights in microseconds, stacks at
    the switch out), ``blocked_s`` (seconds asleep: the thread gave the CPU up),
    ``runqueue_s`` (seconds preempted, waiting for a CPU), ``unmatched``: switch-outs whose
    switch back in was not seen (counted up to the end of the recording)."""

    folded: str
    blocked_s: float
    runqueue_s: float
    switches: int
    unmatched: int


def off_cpu_stacks(samples: list[Sample], end: float | None = None) -> OffCpu:
    """Pair each ``sched:sched_switch`` sample with a call chain (a server thread going off
    CPU, from the cgroup-filtered event) with the next ``sched:sched_switch`` whose
    ``next_pid`` is that thread (the system-wide event: it comes back). The interval is
    off-CPU time: *blocked* when ``prev_state`` is not ``R``/``R+`` (it slept), else
    *runqueue* (preempted); a thread switched out as it exits (``X``, ``Z``) is not
    counted. An interval still open at the end counts up to ``end``
    (default: the last sample's time)."""
    pending: dict[int, tuple[float, tuple[str, ...], bool]] = {}
    stacks: Counter[tuple[str, ...]] = Counter()
    blocked = runq = 0.0
    switches = 0
    last = 0.0

    def close(tid: int, t: float) -> None:
        nonlocal blocked, runq
        t0, stack, slept = pending.pop(tid)
        dt = max(0.0, t - t0)
        if slept:
            blocked += dt
            stacks[stack] += int(round(dt * 1e6))
        else:
            runq += dt

    for s in samples:
        if not s.event.startswith("sched:sched_switch"):
            continue
        last = max(last, s.time)
        m = _SWITCH.search(s.rest)
        if not m:
            continue
        nxt = int(m["next"])
        if nxt in pending:
            close(nxt, s.time)
        if s.chained:
            switches += 1
            tid = int(m["prev"])
            if tid in pending:  # its switch-in was not seen (filtered out): count up to here
                close(tid, s.time)
            state = m["state"]
            if state.startswith(("X", "Z")):  # it exited: it never comes back
                continue
            pending[tid] = (s.time, (s.comm, *reversed(s.frames)), not state.startswith("R"))
    stop = end if end is not None else last
    unmatched = len(pending)
    for tid in list(pending):
        close(tid, stop)
    return OffCpu(fold(stacks), blocked, runq, switches, unmatched)


def pyspy_stacks(text: str, comms: dict[int, str] | None = None,
                 idle_leaves: frozenset[str] = frozenset()) -> tuple[str, str, int, int]:
    """Fold ``py-spy record --format raw`` output: the root ``process PID:"CMDLINE"`` frame
    becomes the process name (``comms[PID]``, else ``python``), so no command line (and no
    password in it) is stored; a ``0xADDR (DSO)`` frame becomes ``[DSO]``. Samples whose
    leaf frame's function is in ``idle_leaves`` (a thread waiting in ``epoll_wait``,
    ``select``, ...) are split off.

    Returns (on-CPU folded text, idle folded text, on-CPU samples, idle samples)."""
    busy: Counter[tuple[str, ...]] = Counter()
    idle: Counter[tuple[str, ...]] = Counter()
    for line in text.splitlines():
        head, _, count = line.rpartition(" ")
        if not head or not count.isdigit():
            continue
        frames = head.split(";")
        out = []
        for i, f in enumerate(frames):
            m = _PYSPY_ROOT.match(f) if i == 0 else None
            if m:
                out.append((comms or {}).get(int(m["pid"]), "python"))
            elif f.startswith("0x") and f.endswith(")") and " (" in f:
                out.append(f"[{f.rsplit(' (', 1)[1][:-1]}]")
            else:
                out.append(f)
        leaf = out[-1].split(" (", 1)[0] if out else ""
        (idle if leaf in idle_leaves else busy)[tuple(out)] += int(count)
    return fold(busy), fold(idle), sum(busy.values()), sum(idle.values())


@dataclass(frozen=True)
class SyscallSum:
    """One system call summed over the server's threads: calls, errors, total time in seconds."""

    name: str
    count: int
    errors: int
    total_s: float


_RAW_ENTER = re.compile(r"^NR (\d+) \(")
_RAW_EXIT = re.compile(r"^NR (\d+) = (-?\d+)")
#: Error returns of a system call: -4095..-1 (the kernel's MAX_ERRNO).
_MAX_ERRNO = 4095


def raw_syscalls(samples: list[Sample], names: dict[int, str]) -> list[SyscallSum]:
    """The syscall table from ``raw_syscalls:sys_enter`` / ``sys_exit`` samples: calls are
    the enters; per thread, an exit closes that thread's open enter of the same number and
    adds the interval to the call's time; an exit returning -4095..-1 is an error. A call
    entered before the recording (its exit alone) adds nothing; ``names``: number -> name
    (:func:`syscall_names`), an unknown number reads ``nr_N``. Most time first."""
    calls: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    total: dict[str, float] = {}
    open_: dict[int, tuple[int, float]] = {}
    for s in samples:
        if s.event == "raw_syscalls:sys_enter":
            m = _RAW_ENTER.match(s.rest)
            if m:
                nr = int(m[1])
                calls[names.get(nr, f"nr_{nr}")] += 1
                open_[s.tid] = (nr, s.time)
        elif s.event == "raw_syscalls:sys_exit":
            m = _RAW_EXIT.match(s.rest)
            if not m:
                continue
            nr, ret = int(m[1]), int(m[2])
            name = names.get(nr, f"nr_{nr}")
            got = open_.pop(s.tid, None)
            if got is None or got[0] != nr:
                continue
            total[name] = total.get(name, 0.0) + max(0.0, s.time - got[1])
            if -_MAX_ERRNO <= ret < 0:
                errors[name] += 1
    rows = [SyscallSum(n, calls[n], errors[n], total.get(n, 0.0)) for n in calls]
    return sorted(rows, key=lambda r: (-r.total_s, -r.count, r.name))


def syscall_names(header: str = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h") -> dict[int, str]:
    """System call number -> name from the kernel's user API header (``#define __NR_NAME N``,
    Debian's linux-libc-dev); {} when it cannot be read."""
    out: dict[int, str] = {}
    try:
        text = open(header).read()
    except OSError:
        return out
    for m in re.finditer(r"^#define __NR_(\w+) (\d+)$", text, re.M):
        out[int(m[2])] = m[1]
    return out
