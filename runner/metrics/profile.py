"""A CPU profile of the server under test over one measured phase (docs/methodology.md,
"Server profiles").

:class:`PhaseProfiler` starts the profilers before the phase, switches them on at the
start of its measured span and off at its end (or at the phase's, for drivers that do not
mark the span), and turns their output into a
:class:`runner.metrics.profile_data.ServerProfile`:

* **perf** (Linux ``perf``, ``/usr/bin/perf``) samples ``cpu-clock`` at ``rate_hz`` on
  every CPU, filtered to the server's cgroup v2 (``perf record -a -G PATH``: every task of
  the cgroup, processes forked during the phase included), with kernel stacks and DWARF
  unwinding of user stacks (Debian's libraries are built without frame pointers, so a
  frame-pointer walk stops at the first libc frame). With ``off_cpu`` the same recording
  holds ``sched:sched_switch`` of the cgroup with kernel stacks and, from every CPU,
  the switch back in of threads with the server's process names, which gives the
  off-CPU time and its stacks (:func:`runner.metrics.profile_fold.off_cpu_stacks`).
  ``perf script --no-inline``: frames of inlined functions are not shown (perf's
  addr2line step cannot open a container's binary by its path inside the container,
  and its failure ends the output early). ``perf record`` starts with its events
  disabled (``-D -1``) and is switched on and off through its control FIFO, so its
  start-up (reading every process's memory maps) is not in the phase.
* **py-spy** (PyPI ``py-spy``) for Python servers: ``py-spy record --native
  --subprocesses`` on the server's process, so Python frames (``ftp_RETR
  (pyftpdlib/handlers.py:...)``) and the interpreter's C frames show; kernel frames do
  not. In a container, without ``--native`` (its unwinder fails there): Python frames
  only. Perf cannot name Python frames without Python 3.12's ``-X perf`` trampoline.
* the syscall mix, in the same recording: ``raw_syscalls:sys_enter`` and ``sys_exit`` of
  the cgroup, paired per thread after the phase: calls, errors and time per system call
  (:func:`runner.metrics.profile_fold.raw_syscalls`). ``perf trace -s`` gives the same table
  but decodes every event while the phase runs, which cost 4x on 300 logins here.

Containers: the profilers run on the host. A container's cgroup v2 folder is given as
``cgroup`` like a local server's; perf reads the container's binaries through
``/proc/PID/root``; py-spy is given the host PID of the container's process.

Imports only ``runner.config`` (through runner.metrics.cgroup_cpu).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from runner.metrics.cgroup_cpu import v2_root
from runner.metrics.profile_data import ServerProfile, SyscallRow
from runner.metrics.profile_fold import (
    off_cpu_stacks,
    on_cpu_stacks,
    parse_perf_script,
    pyspy_stacks,
    raw_syscalls,
    syscall_names,
)

log = logging.getLogger(__name__)

PERF = "/usr/bin/perf"
#: Stack bytes copied per on-CPU sample for DWARF unwinding (perf's default is 8192).
DWARF_STACK = 16384
#: Leaf functions of a Python server's thread that is waiting, not running (py-spy samples
#: every thread at every tick; these samples are off-CPU).
PY_IDLE_LEAVES = frozenset({"epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect",
                            "__select", "__poll", "accept", "accept4", "nanosleep", "clock_nanosleep",
                            "__futex_abstimed_wait_common", "futex_wait", "__GI___futex_abstimed_wait_cancelable64",
                            "pthread_cond_wait", "pthread_cond_timedwait", "sem_wait", "sem_timedwait",
                            "wait4", "waitpid", "pause", "sigwaitinfo", "__GI_epoll_wait", "__GI___poll",
                            "__GI___select", "__GI___nanosleep", "__clock_nanosleep"})
#: Python functions of the lab's Python servers' event loops that call the wait itself
#: (``epoll.poll``, ``select.select``). Without ``--native`` (a server in a container) a
#: sample's leaf is the last Python frame, and py-spy does not drop the waiting samples itself:
#: it asks the OS whether a thread runs only when it can map the thread to its OS thread id,
#: which it does not do for a process in a container (``_get_os_thread_id`` returns none
#: when "dockerized", py-spy issue 490), and its fallback heuristic passed every sample here
#: as running. A sample whose leaf is one of these is counted as waiting. It also takes the few
#: samples in the rest of that function (the loop's own dispatch), and a wait that returned
#: at once is on the CPU: on a busy server the waiting share comes out a little high
#: (pyftpdlib 2.2.0 in its container, RETR, 3 s: 67 of 302 samples in
#: ``_BasePollEpoll.poll``, where the container's ``cpu.stat`` put 13% of the span off the CPU).
#: pyftpdlib: ``pyftpdlib/ioloop.py``; Twisted: ``twisted/internet/*reactor.py``;
#: asyncio: ``selectors.py``.
PY_WAIT_FRAMES = frozenset({"_BasePollEpoll.poll", "_Select.poll", "_Poll.poll", "_Epoll.poll", "_DevPoll.poll",
                            "_Kqueue.poll", "EPollReactor.doPoll", "PollReactor.doPoll", "SelectReactor.doSelect",
                            "EpollSelector.select", "PollSelector.select", "SelectSelector.select",
                            "_PollLikeSelector.select", "DevpollSelector.select"})
_COMM = re.compile(r"^[A-Za-z0-9._:/+-]{1,15}$")
_WAIT_S = 15.0


class ProfilerUnavailable(Exception):
    """A profiler cannot run here; ``str(exc)`` says why and what to install."""


def perf_version() -> str:
    """``perf --version``'s text, e.g. ``perf version 6.1.187``. Raises ProfilerUnavailable."""
    if not os.access(PERF, os.X_OK):
        raise ProfilerUnavailable(f"{PERF} not found: apt-get install linux-perf")
    out = subprocess.run([PERF, "--version"], capture_output=True, text=True, timeout=10)
    return out.stdout.strip() or "perf"


def pyspy_path() -> str | None:
    """The py-spy executable: beside this interpreter (the venv's bin), else on PATH."""
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def ensure_tracefs() -> str | None:
    """The tracefs mount perf's tracepoints need (``/sys/kernel/tracing``), mounting it
    when it is empty and this process may. Returns None when ready, else why not."""
    root = Path("/sys/kernel/tracing")
    if (root / "events").is_dir():
        return None
    if os.geteuid() != 0:
        return "tracefs is not mounted at /sys/kernel/tracing and mounting it needs root"
    done = subprocess.run(["mount", "-t", "tracefs", "nodev", str(root)], capture_output=True, text=True, timeout=10)
    if done.returncode != 0 or not (root / "events").is_dir():
        return f"tracefs could not be mounted: {done.stderr.strip()[:200]}"
    return None


def cgroup_name(folder: str | Path | None) -> str | None:
    """``folder`` relative to the cgroup v2 root, as ``perf -G`` takes it; None when
    ``folder`` is not a folder of the v2 hierarchy (e.g. ``engine``: Docker's stats API)."""
    root = v2_root()
    if folder is None or root is None:
        return None
    try:
        rel = Path(folder).resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return None
    return str(rel) if str(rel) != "." and Path(folder).is_dir() else None


def _comms(cgroup_dir: Path) -> list[str]:
    """The process names of the cgroup's threads now (safe ones only: a tracepoint filter
    is built from them)."""
    names: set[str] = set()
    try:
        pids = (cgroup_dir / "cgroup.procs").read_text().split()
    except OSError:
        return []
    for pid in pids[:4096]:
        try:
            names.add(Path(f"/proc/{pid}/comm").read_text().strip())
        except OSError:
            continue
    return sorted(n for n in names if _COMM.fullmatch(n))


class _Child:
    """A profiler process with its stderr collected by a thread."""

    def __init__(self, argv: list[str], *, stdout: int | None = subprocess.DEVNULL) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True)
        self.err: list[str] = []
        self._t = threading.Thread(target=self._drain, daemon=True)
        self._t.start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if len(self.err) < 200:
                self.err.append(line.rstrip())

    def interrupt(self, timeout: float = _WAIT_S) -> int | None:
        """SIGINT (the profilers write their output on it), wait at most ``timeout`` s,
        then kill. Returns the exit status (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            return None
        self._t.join(2)
        return rc

    def tail(self) -> str:
        return " | ".join(self.err[-3:])[:300]


class PhaseProfiler:
    """The profilers of one measured phase.

    Args:
        pid: the server's root process (host PID), for py-spy.
        cgroup_dir: the server's cgroup v2 folder (a local server's, a container's), for
            perf; None: no perf recording (on-CPU from py-spy only, no syscalls, no off-CPU).
        python: the server is a Python program (py-spy samples it instead of perf's
            cpu-clock).
        rate_hz: samples per second (per CPU for perf), 1..999.
        off_cpu: record context switches for the off-CPU time and stacks.
        syscalls: record the ``raw_syscalls`` tracepoints for the syscall table.
        jit: how the server's JIT-compiled code gets names (runner.catalogue.servers.JIT_SERVERS):
            ``node``: a perf map V8 writes as it compiles (the server started with
            ``--perf-basic-prof``); ``jvm``: ``jcmd PID Compiler.perfmap`` after the phase
            (:func:`jvm_perf_map`); None: no JIT. Either way the notes say which of the
            cgroup's processes had a map.

    Use: :meth:`start` before the phase (returns when every profiler is recording),
    :meth:`stop` after it (returns the ServerProfile). :meth:`close` removes the work
    folder and ends what still runs; it is safe to call more than once. Nothing here
    raises for a profiler that fails at run time: what it could not see goes to ``notes``.
    Raises ProfilerUnavailable from :meth:`start` when no profiler can run at all.
    """

    def __init__(self, pid: int | None, cgroup_dir: str | Path | None, *, python: bool, rate_hz: int = 99,
                 off_cpu: bool = True, syscalls: bool = True, jit: str | None = None) -> None:
        if not 1 <= rate_hz <= 999:
            raise ValueError(f"rate_hz {rate_hz} outside 1..999")
        self.pid = pid
        self.cgroup_dir = Path(cgroup_dir) if cgroup_dir else None
        self.python = python
        self.rate_hz = rate_hz
        self.off_cpu = off_cpu
        self.syscalls = syscalls
        if jit not in (None, "node", "jvm"):
            raise ValueError(f"jit {jit!r}: want 'node', 'jvm' or None")
        self.jit = jit
        self.notes: list[str] = []
        self.work = Path(tempfile.mkdtemp(prefix="xferlab-profile-"))
        self._record: _Child | None = None
        self._want_sys = False
        self._pyspy: _Child | None = None
        self._ctl: int | None = None
        self._ack: int | None = None
        self._t0 = 0.0  # perf_counter() when perf was last switched on; 0.0 while it is off
        self._span = False
        self._pyspy_t0 = 0.0  # perf_counter() when py-spy reported that it samples
        self.duration_s = 0.0
        self._comms: dict[int, str] = {}

    # -- start ---------------------------------------------------------------------------------
    def start(self, *, span: bool = False) -> None:
        """Start the profilers and return once they record (bounded: 15 s each). With
        ``span``, perf records only between :meth:`span_begin` and :meth:`span_end` (the
        measured span, without the phase's untimed set-up and teardown), else from here
        to :meth:`stop`. py-spy cannot be paused: a Python server's profile always spans
        the whole phase (its notes say so when ``span`` was asked)."""
        cg = cgroup_name(self.cgroup_dir)
        if self.cgroup_dir is not None and cg is None:
            self.notes.append(f"no cgroup v2 folder for perf ({self.cgroup_dir}): no kernel stacks, "
                              "syscalls or off-CPU time")
        version = ""
        try:
            version = perf_version()
        except (ProfilerUnavailable, OSError, subprocess.SubprocessError) as exc:
            self.notes.append(str(exc))
            cg = None
        self.perf_version = version
        if self.python and (pyspy_path() is None or self.pid is None):
            raise ProfilerUnavailable("py-spy not found (pip install py-spy) or the server has no PID")
        if not self.python and cg is None:
            raise ProfilerUnavailable("; ".join(self.notes) or "no cgroup for perf")
        tracing = ensure_tracefs() if (self.off_cpu or self.syscalls) and cg else None
        if tracing:
            self.notes.append(f"no tracepoints ({tracing}): no syscall table or off-CPU stacks")
        want_sched = self.off_cpu and cg is not None and tracing is None
        self._want_sys = self.syscalls and cg is not None and tracing is None
        if cg is not None and (not self.python or want_sched or self._want_sys):
            self._start_record(cg, want_sched, self._want_sys)
        if self.python:
            self._start_pyspy()
            self._pyspy_t0 = time.perf_counter()
            if span:
                self.notes.append("py-spy records the whole phase (it cannot be paused): the untimed set-up and "
                                  "teardown are in its stacks")
        self._span = span and not self.python
        if not self._span:
            self._resume()
        else:
            self.notes.append("recorded over the measured span (the untimed set-up and teardown left out)")

    def span_begin(self) -> None:
        """The measured span starts: perf records from here when :meth:`start` was given
        ``span``; otherwise (and while it records) a no-op."""
        if self._span:
            self._resume()

    def span_end(self) -> None:
        """The measured span ended: perf stops recording when :meth:`start` was given
        ``span``; otherwise a no-op."""
        if self._span:
            self._pause()

    def _resume(self) -> None:
        if self._t0:
            return
        self._enable("enable")
        self._t0 = time.perf_counter()

    def _pause(self) -> None:
        if not self._t0:
            return
        self._enable("disable")
        self.duration_s += time.perf_counter() - self._t0
        self._t0 = 0.0

    def _start_record(self, cg: str, sched: bool, sys_calls: bool) -> None:
        ctl, ack = self.work / "ctl", self.work / "ack"
        os.mkfifo(ctl)
        os.mkfifo(ack)
        events: list[str] = []
        groups: list[str] = []
        if not self.python:
            events += ["-e", f"cpu-clock/freq={self.rate_hz}/", "--call-graph", f"dwarf,{DWARF_STACK}"]
            groups.append(cg)
        if sched:
            events += ["-e", "sched:sched_switch/call-graph=fp/"]
            groups.append(cg)
            comms = _comms(self.cgroup_dir) if self.cgroup_dir else []
            events += ["-e", "sched:sched_switch/call-graph=no/"]
            if comms:
                events += ["--filter", " || ".join(f'next_comm == "{c}"' for c in comms)]
            groups.append("")
        if sys_calls:
            events += ["-e", "raw_syscalls:sys_enter/call-graph=no/", "-e", "raw_syscalls:sys_exit/call-graph=no/"]
            groups += [cg, cg]
        argv = [PERF, "record", "-a", "-D", "-1", "--control", f"fifo:{ctl},{ack}", "-o", str(self.work / "perf.data"),
                *events, "-G", ",".join(groups)]
        self._record = _Child(argv)
        # perf opens the FIFOs once it is set up; opening our ends waits for that (bounded)
        self._ctl = _open_fifo(ctl, os.O_WRONLY, self._record)
        self._ack = _open_fifo(ack, os.O_RDONLY, self._record) if self._ctl is not None else None
        if self._ctl is None or self._ack is None:
            self.notes.append(f"perf record did not start: {self._record.tail()}")
            self._record.interrupt(2)
            self._record = None

    def _enable(self, what: str) -> None:
        if self._record is None or self._ctl is None or self._ack is None:
            return
        try:
            os.write(self._ctl, f"{what}\n".encode())
            _read_ack(self._ack, self._record)
        except OSError as exc:
            self.notes.append(f"perf record control ({what}) failed: {exc}")

    def _start_pyspy(self) -> None:
        exe = pyspy_path()
        assert exe is not None and self.pid is not None
        self._comms = _tree_comms(self.pid)
        native = ["--native"]
        if other_mount_ns(self.pid):
            native = []
            self.notes.append("py-spy without --native (the server runs in another mount namespace, a container: "
                              "py-spy's native unwinder fails there with UNW_EBADREG): Python frames only; "
                              "py-spy cannot ask the OS whether a container's thread waits, so a sample in "
                              "the event loop's wait call counts as waiting (PY_WAIT_FRAMES)")
        self._pyspy = _Child([exe, "record", "--pid", str(self.pid), "--rate", str(self.rate_hz), "--format", "raw",
                              "--subprocesses", *native, "-o", str(self.work / "pyspy.txt")], stdout=subprocess.PIPE)
        out = self._pyspy.proc.stdout
        assert out is not None
        ready = threading.Event()

        def wait() -> None:
            for line in out:
                if "Sampling process" in line:
                    ready.set()
                    return

        threading.Thread(target=wait, daemon=True).start()
        if not ready.wait(_WAIT_S):
            self.notes.append(f"py-spy did not start: {self._pyspy.tail()}")
            self._pyspy.interrupt(2)
            self._pyspy = None

    # -- stop ----------------------------------------------------------------------------------
    def stop(self) -> ServerProfile:
        """End the recording (the phase is over) and read it into a ServerProfile;
        ``duration_s`` is the time it recorded (py-spy's, from its first sample, for a
        Python server)."""
        self._pause()
        if self._pyspy is not None:
            self.duration_s = time.perf_counter() - self._pyspy_t0
        self._comms.update(_tree_comms(self.pid) if self.pid else {})
        if self._pyspy is not None:
            self._pyspy.interrupt()
        if self._record is not None:
            self._close_fifos()
            self._record.interrupt()
            if self.jit is not None and self.cgroup_dir is not None and not self.python:
                self.notes.append(perf_maps(self.cgroup_dir, dump=self.jit == "jvm"))
        try:
            return self._read()
        finally:
            self.close()

    def _read(self) -> ServerProfile:
        on_cpu, on_s, profiler, version = "", 0.0, "perf", self.perf_version
        off_cpu: str | None = None
        off_s: float | None = None
        syscalls: tuple[SyscallRow, ...] = ()
        if self._record is not None:
            text = self._script()
            samples = parse_perf_script(text)
            if not self.python:
                on = on_cpu_stacks(samples)
                on_cpu, on_s = on.folded, on.samples / self.rate_hz
                if on.unresolved:
                    self.notes.append(f"{on.unresolved} of {on.samples} samples have frames without a symbol, in "
                                      f"{', '.join(on.unresolved_dsos[:8])} (no debug symbols for them here)")
            if self.off_cpu:
                off = off_cpu_stacks(samples)
                off_cpu, off_s = off.folded, off.blocked_s
                self.notes.append(f"off-CPU: {off.switches} switches out; {off.blocked_s:.3f} s asleep, "
                                  f"{off.runqueue_s:.3f} s preempted waiting for a CPU"
                                  + (f"; {off.unmatched} not seen coming back (counted to the end)"
                                     if off.unmatched else ""))
            if self._want_sys:
                rows = raw_syscalls(samples, syscall_names())
                syscalls = tuple(SyscallRow(r.name, r.count, r.total_s, r.errors) for r in rows)
        if self._pyspy is not None:
            profiler = "py-spy"
            version = _pyspy_version()
            try:
                raw = (self.work / "pyspy.txt").read_text()
            except OSError:
                raw = ""
                self.notes.append(f"py-spy wrote nothing: {self._pyspy.tail()}")
            on_cpu, idle, busy_n, idle_n = pyspy_stacks(raw, self._comms, PY_IDLE_LEAVES | PY_WAIT_FRAMES)
            on_s = busy_n / self.rate_hz
            self.notes.append(f"py-spy: {busy_n} samples running, {idle_n} waiting (leaf in epoll_wait, select, "
                              "or the event loop's wait call; left out of the on-CPU stacks); no kernel frames")
            lag = [line for line in self._pyspy.err if "behind in sampling" in line]
            if lag:
                self.notes.append(f"py-spy fell behind: {lag[-1].removeprefix('py-spy> ')[:120]}")
        return ServerProfile(profiler=profiler, profiler_version=version, rate_hz=self.rate_hz,
                             duration_s=self.duration_s, on_cpu=on_cpu, off_cpu=off_cpu, on_cpu_s=on_s,
                             off_cpu_s=off_s, syscalls=syscalls, notes=tuple(self.notes))

    def _script(self) -> str:
        data = self.work / "perf.data"
        if not data.exists():
            self.notes.append(f"perf record wrote nothing: {self._record.tail() if self._record else ''}")
            return ""
        try:
            done = subprocess.run([PERF, "script", "--no-inline", "-i", str(data), "-F",
                                   "comm,tid,time,event,trace,ip,sym,dso"],
                                  capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            self.notes.append("perf script took over 300 s: no stacks")
            return ""
        return done.stdout

    def _close_fifos(self) -> None:
        for fd in (self._ctl, self._ack):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._ctl = self._ack = None

    def close(self) -> None:
        """End any profiler still running and remove the work folder."""
        for child in (self._record, self._pyspy):
            if child is not None and child.proc.poll() is None:
                child.proc.kill()
                child.proc.wait(5)
        self._close_fifos()
        shutil.rmtree(self.work, ignore_errors=True)


def other_mount_ns(pid: int) -> bool:
    """Whether host PID ``pid`` runs in a mount namespace other than this process's (a
    container's); False when that cannot be read."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    except OSError:
        return False


def ns_ids(pid: int) -> tuple[int, int, int]:
    """``(pid in its own namespace, real uid, real gid)`` of a host PID, from
    ``/proc/PID/status`` (``NSpid``'s last field). Raises OSError when it has exited."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    nspid = int(fields.get("NSpid", str(pid)).split()[-1])
    return nspid, int(fields["Uid"].split()[0]), int(fields["Gid"].split()[0])


def map_path(pid: int) -> Path:
    """Where perf reads the JIT perf map of host PID ``pid``: ``/tmp/perf-NSPID.map`` in the
    process's mount namespace, seen from here through ``/proc/PID/root``. Raises OSError."""
    return Path(f"/proc/{pid}/root/tmp/perf-{ns_ids(pid)[0]}.map")


def jvm_perf_map(pid: int) -> str | None:
    """Ask the JVM of host PID ``pid`` to write its perf map (``jcmd NSPID Compiler.perfmap``,
    JDK 17+: ``/tmp/perf-NSPID.map`` of every method then in the code cache), run inside
    the process's mount and PID namespaces as its user (``nsenter``), so a container's own
    JDK answers. Returns None on success, else why not (bounded: 30 s)."""
    try:
        nspid, uid, gid = ns_ids(pid)
    except (OSError, KeyError, ValueError) as exc:
        return f"pid {pid}: {exc}"
    argv = ["nsenter", f"--target={pid}", "--mount", "--pid", f"--setuid={uid}", f"--setgid={gid}", "--",
            "jcmd", str(nspid), "Compiler.perfmap"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"jcmd {nspid} Compiler.perfmap: {exc}"
    if done.returncode != 0:
        return f"jcmd {nspid} Compiler.perfmap exited {done.returncode}: {(done.stderr or done.stdout).strip()[:200]}"
    return None


def perf_maps(cgroup_dir: Path, *, dump: bool) -> str:
    """The note on JIT frames of a profiled cgroup: which of its processes have a perf map
    (``dump``: the JVMs among them are asked to write theirs first, :func:`jvm_perf_map`).
    perf script reads a containerised process's map inside its mount namespace itself."""
    try:
        pids = [int(p) for p in (cgroup_dir / "cgroup.procs").read_text().split()[:4096]]
    except (OSError, ValueError) as exc:
        return f"JIT frames: the cgroup's processes could not be read ({exc}): unresolved"
    failed: list[str] = []
    have: list[int] = []
    for pid in pids:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if dump and comm == "java":
            why = jvm_perf_map(pid)
            if why:
                failed.append(why)
        try:
            if map_path(pid).is_file():
                have.append(pid)
        except OSError:
            continue
    if not have:
        return "JIT frames unresolved: no process of the server has a perf map (/tmp/perf-PID.map)" + (
            f"; {failed[0]}" if failed else "")
    return (f"JIT frames named from the perf maps of {len(have)} process(es) (pid {', '.join(map(str, have[:8]))})"
            + (f"; {failed[0]}" if failed else ""))


def _open_fifo(path: Path, flags: int, child: _Child) -> int | None:
    """Open one end of a FIFO perf opens too, giving up when perf exits or after 15 s."""
    deadline = time.monotonic() + _WAIT_S
    while time.monotonic() < deadline:
        try:
            return os.open(path, flags | os.O_NONBLOCK)
        except OSError:  # ENXIO: opening the write end before perf opened the read end
            if child.proc.poll() is not None:
                return None
            time.sleep(0.02)
    return None


def _read_ack(fd: int, child: _Child) -> None:
    """Wait (at most 15 s) for perf's ``ack`` on its control FIFO."""
    deadline = time.monotonic() + _WAIT_S
    got = b""
    while time.monotonic() < deadline and b"ack" not in got:
        try:
            got += os.read(fd, 64)
        except BlockingIOError:
            if child.proc.poll() is not None:
                return
            time.sleep(0.005)


def _tree_comms(pid: int) -> dict[int, str]:
    """PID -> process name of ``pid`` and its descendants now (py-spy's root frames)."""
    out: dict[int, str] = {}
    todo = [pid]
    while todo and len(out) < 4096:
        p = todo.pop()
        try:
            out[p] = Path(f"/proc/{p}/comm").read_text().strip()
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        todo += [int(k) for k in kids]
    return out


def _pyspy_version() -> str:
    exe = pyspy_path()
    if exe is None:
        return "py-spy"
    try:
        return subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "py-spy"
