"""Running a compiled load tool (wrk, h2load) as a child process and measuring it.

Shared by the drivers that make their load with another program: find the binary
(:func:`require`), place the download fixture (:func:`prepare_fixture`), run the
program inside the target's network namespace when it has one and read its own CPU
time from ``wait4(2)``'s rusage and its peak memory from ``/proc/PID/status`` ``VmHWM``
(:func:`run_child`).

A child started from a thread that joined a network namespace lives in that namespace
(``fork`` copies the calling thread's namespaces), so :func:`run_child` starts it from
:func:`runner.net.netns.call_in_netns` when ``netns`` is set.

When this process is root the tool runs as the lab user (runner.load.tools.labuser,
``XFERLAB_CLIENT_USER``): Popen drops every supplementary group, then sets the group and
the user in the child before exec, after the namespace is joined and the output files
are in place. It inherits no descriptor but 0-2 (Popen's ``close_fds``).
"""
from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.catalogue.workloads import workloads_of
from runner.load.base import DriverUnavailable, LoadError
from runner.load.target import Target
from runner.load.tools.labuser import client_user, open_folder

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams


@dataclass
class ChildRun:
    """What one run of a load tool gave.

    Attributes:
        returncode: exit status (negative: killed by that signal, e.g. -9 after the time bound).
        stdout / stderr: its output (decoded as UTF-8, bad bytes replaced).
        user_s / system_s: CPU time of the child (and its reaped children) from wait4 rusage (s).
        max_rss: its peak resident set (bytes): the program's ``VmHWM`` read every 50 ms
            (:func:`_watch_hwm`), wait4's ``ru_maxrss`` only if it was never read.
        wall_s: wall time from start to exit (s).
        timed_out: it was killed for running past the time bound.
        started_at: wall clock of the start (``time.time()``, epoch s).
    """

    returncode: int
    stdout: str
    stderr: str
    user_s: float
    system_s: float
    max_rss: int
    wall_s: float
    timed_out: bool = False
    started_at: float | None = None

    def no_result(self, tool: str, exc: ValueError) -> LoadError:
        """The LoadError of a run whose output has no result (``exc``: the parser's
        complaint), e.g. ``"wrk (exit 1): no Requests/sec line: <last 3 output lines>"``;
        the caller raises it."""
        tail = " | ".join((self.stdout + self.stderr).strip().splitlines()[-3:])
        return LoadError(f"{tool} (exit {self.returncode}{', killed after the time bound' if self.timed_out else ''}): "
                         f"{exc}: {tail}")

    def client_figures(self) -> dict[str, Any]:
        """The PhaseResult fields this run gives of the client itself: its CPU time (s),
        peak memory (bytes) and its wall-clock start and end (epoch s; None when the start
        is unknown)."""
        return {"client_cpu_user_s": self.user_s, "client_cpu_system_s": self.system_s, "driver_max_rss": self.max_rss,
                "started_at": self.started_at,
                "ended_at": None if self.started_at is None else self.started_at + self.wall_s}


def require(binary: str, package: str) -> str:
    """Path of ``binary`` in PATH. Raises DriverUnavailable ``"wrk: binary not found in
    PATH; apt-get install wrk"`` when missing."""
    path = shutil.which(binary)
    if path is None:
        raise DriverUnavailable(f"{binary}: binary not found in PATH; apt-get install {package}")
    return path


def tool_version(argv: list[str]) -> str:
    """First line of ``argv``'s output (``wrk -v``, ``h2load --version``), whatever its
    exit status, run as the lab user when this process is root (module docstring);
    ``"unknown"`` when it cannot be run within 10 s or the lab user is missing."""
    try:
        user = client_user()
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10, cwd="/",
                           **(user.popen_kwargs() if user is not None else {}))
    except (OSError, subprocess.SubprocessError, DriverUnavailable):
        return "unknown"
    lines = (p.stdout or p.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"


class HttpToolDriver:
    """What the HTTP load programs (wrk, h2load) share as drivers (runner.load.base.Driver):
    they speak HTTP, run every HTTP workload they do not refuse, and run as the lab user.
    Subclasses set ``name`` (also the program's name in PATH) and ``package`` (its Debian
    package, for the skip reason) and implement ``version`` and ``run``; they override
    :meth:`refuses` when they cannot run some parameters."""

    name = ""
    package = ""
    protocols: tuple[str, ...] = ("http",)
    workloads: tuple[str, ...] = workloads_of("http")

    def check(self) -> None:
        """Raises DriverUnavailable (``apt-get install <package>``) when the program is not
        in PATH, or when this process is root and the lab user it runs as is missing
        (runner.load.tools.labuser.client_user)."""
        require(self.name, self.package)
        client_user()

    def refuses(self, workload: str, params: WorkloadParams) -> str | None:
        """Why the program cannot run ``workload`` with ``params``, None when it can (here:
        always None)."""
        return None

    def executable(self, workload: str, target: Target, params: WorkloadParams) -> str:
        """The program's path, once ``workload``, ``params`` and ``target`` are checked
        for a run.

        Raises:
            ValueError: not an HTTP workload, parameters the program refuses
                (:meth:`refuses`), or a target without an HTTP port.
            DriverUnavailable: the program is not in PATH.
        """
        if workload not in self.workloads:
            raise ValueError(f"driver {self.name} runs {', '.join(self.workloads)}, not {workload!r}")
        why = self.refuses(workload, params)
        if why:
            raise ValueError(why)
        if target.http_port is None:
            raise ValueError(f"{workload}: the target has no HTTP port (Target.http_port is None)")
        return require(self.name, self.package)


def run_child(argv: list[str], *, netns: str | None, timeout_s: float,
              checkpoint: Callable[[str], None] | None = None, half_s: float = 0.0,
              folder: str | None = None) -> ChildRun:
    """Run ``argv`` to its end (stdin closed, output to temporary files), inside the
    network namespace ``netns`` when given, killed (SIGKILL) after ``timeout_s`` s, with
    the soft limit of open files raised to the hard one, as the lab user when this process
    is root (module docstring). ``folder``: the tool's own files (its script, the upload
    body), made readable, not writable, by the lab user (owner root, group the user's:
    the folder 0710, its files 0640). ``checkpoint("loaded")`` (when given) is called from
    a timer thread ``half_s`` s after the start (half-way through the tool's phase), and
    waited for before returning (not called if the tool ended first).

    Raises:
        DriverUnavailable: this process is root and the lab user does not exist (the
            message names ``XFERLAB_CLIENT_USER`` and the install step).
        LoadError: the program cannot be started, or ``netns`` cannot be joined.
    """
    user = client_user()
    drop = user.popen_kwargs() if user is not None else {}
    if user is not None and folder is not None:
        open_folder(Path(folder), user)
        for entry in os.scandir(folder):
            if entry.is_file(follow_symlinks=False):
                os.chown(entry.path, 0, user.gid)
                os.chmod(entry.path, 0o640)
    _raise_nofile()

    def body() -> ChildRun:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            t0, epoch = time.perf_counter(), time.time()
            try:
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, close_fds=True, **drop)
            except (OSError, subprocess.SubprocessError) as e:
                raise LoadError(f"{argv[0]}: cannot start: {e}") from e
            lock, state = threading.Lock(), {"reaped": False, "killed": False}

            def expire() -> None:
                with lock:
                    if not state["reaped"]:
                        state["killed"] = True
                        p.kill()

            timer = threading.Timer(timeout_s, expire)
            timer.start()
            mark = threading.Timer(half_s, checkpoint, ("loaded",)) if checkpoint is not None else None
            if mark is not None:
                mark.start()
            hwm = [0]
            done = threading.Event()
            watch = threading.Thread(target=_watch_hwm, args=(p.pid, hwm, done), daemon=True)
            watch.start()
            try:
                _, status, ru = os.wait4(p.pid, 0)
            finally:
                with lock:
                    state["reaped"] = True
                timer.cancel()
                done.set()
                watch.join()
                if mark is not None:  # a tool that ended early: no checkpoint after its end
                    mark.cancel()
                    mark.join()
            p.returncode = os.waitstatus_to_exitcode(status)
            wall = time.perf_counter() - t0
            out.seek(0)
            err.seek(0)
            return ChildRun(p.returncode, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"),
                            ru.ru_utime, ru.ru_stime, hwm[0] or ru.ru_maxrss * 1024, wall, state["killed"], epoch)

    if not netns:
        return body()
    from runner.net.netns import NetnsError, call_in_netns

    try:
        return call_in_netns(netns, body)
    except NetnsError as e:
        raise LoadError(f"{argv[0]}: {e}") from e


def _raise_nofile() -> None:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (at most 2**20), which the
    child inherits: a tool with thousands of connections needs as many descriptors. Never raises."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(1 << 20, hard if hard != resource.RLIM_INFINITY else 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            pass


def _watch_hwm(pid: int, out: list[int], done: threading.Event) -> None:
    """Keep ``out[0]`` at the child's ``VmHWM`` (bytes) until ``done``, read every 50 ms.

    wait4's ``ru_maxrss`` cannot be used for the peak memory: the child was forked from
    this (large) Python process, and exec(2) records the old address space's high-water
    mark, so ``ru_maxrss`` would be at least this process's RSS. ``VmHWM`` belongs to the
    program's own address space; it only grows, so the last read before the exit is the
    peak up to 50 ms before it (load tools allocate at start-up)."""
    path = f"/proc/{pid}/status"
    for _ in range(10_000_000):  # bounded: ends with the child, ``done`` is set on reaping
        try:
            with open(path, "rb") as f:
                for line in f:
                    if line.startswith(b"VmHWM:"):
                        out[0] = max(out[0], int(line.split()[1]) * 1024)
                        break
        except (OSError, ValueError):
            pass
        if done.wait(0.05):
            return


def prepare_fixture(target: Target, size: int, notes: list[str]) -> str:
    """The download fixture's name (``xferlab-<size>.bin``, as the RETR workloads'),
    placed in the server's home by runner.load.ftp.fixtures.place_http_fixture (written
    into ``target.root`` when known, else uploaded by STOR when the server speaks FTP);
    else a note in ``notes`` says it is expected in place. Runs its own event loop (call
    it from synchronous code). Raises LoadError (naming the cause: a disk error, a full
    disk, an FTP reply) when it cannot be placed."""
    import asyncio

    from runner.load.ftp.fixtures import place_http_fixture
    from runner.load.ftp.replies import FTPError

    try:
        name, note = asyncio.run(place_http_fixture(target, size))
    except (OSError, FTPError) as e:
        raise LoadError(f"download fixture of {size} bytes not placed on the server: {e}") from e
    if note:
        notes.append(note)
    return name


def body_file(folder: str, size: int) -> str:
    """Write an upload body of ``size`` bytes (a random 64 KiB block repeated) to
    ``folder/body.bin``; return its path. Raises OSError."""
    path = os.path.join(folder, "body.bin")
    blk = os.urandom(min(size, 65536))
    with open(path, "wb") as f:
        left = size
        for _ in range(size // len(blk) + 1):  # bounded
            if left <= 0:
                break
            f.write(blk[:left])
            left -= len(blk)
    return path
