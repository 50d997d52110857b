"""Running N client processes together and measuring each one (the real-client drivers
lftp, wget and curl: runner.load.tools.ftp_tool).

The processes are started by ``clientspawn`` (``clientspawn.c`` here, compiled on first
use with the system C compiler into ``<cache_dir>/clientspawn/`` by runner.load.cbuild, as
the self-test's netlimit): it forks every client, each blocked on one pipe, then closes the pipe,
which releases them together; it reaps each with ``wait4(2)`` and reports its start
(after the release, just before ``exec``), its exit, its wait status and its rusage (user
and system CPU, ``ru_maxrss``, minor and major page faults: the figures of seed 003's
``time`` line). Forking from that small process, not from the Python runner, is what
makes ``ru_maxrss`` the client's own: ``exec(2)`` keeps the high-water mark of the
address space it replaces, so a client started straight from the runner would report at
least the runner's resident set (a ``/bin/true`` started from a Python process holding
200 MiB reported 214 MiB; from clientspawn, 1,000 KiB).

Bounds: past ``bound_s`` after the release clientspawn kills (SIGKILL) every client still
running; clientspawn and its clients are one process group, which :func:`run_clients`
kills (SIGKILL) before it returns or raises, whatever happened (an exception, an
interrupt, clientspawn itself past ``bound_s`` + :data:`GRACE_S`), so no client outlives
the call. Inside ``netns`` when given (clientspawn is started from a thread that joined
it, runner.net.netns.call_in_netns; its children live there too).

Credentials: when this process is root, every client runs as the lab user
(runner.load.tools.labuser, ``XFERLAB_CLIENT_USER``): clientspawn gets ``-u UID -g GID`` and
drops to them in each child after opening its output files and entering its folder.
The job list (every client's argv, passwords included) is mode 0600 and never inherited
by a client (clientspawn opens it close-on-exec and leaves each client only fds 0-2).
"""
from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.load.base import DriverUnavailable, LoadError
from runner.load.tools.labuser import client_user, give_folder, open_folder

SOURCE = Path(__file__).with_name("clientspawn.c")
#: Seconds clientspawn itself may run past the clients' bound before its group is killed.
GRACE_S = 15.0
#: Characters of a client's stderr kept (its last lines) for a failure's note.
STDERR_TAIL = 600


@dataclass
class Job:
    """One client process to run.

    Attributes:
        argv: the program and its arguments (argv[0] looked up in PATH); no element may
            contain a tab or a newline (ValueError from :func:`run_clients`).
        cwd: its working directory (must exist).
    """

    argv: list[str]
    cwd: str


@dataclass
class ClientRun:
    """What one client process did (times in seconds, sizes in bytes).

    Attributes:
        pid: its process id (gone when :func:`run_clients` returns).
        start / end: CLOCK_MONOTONIC seconds of its release (just before exec) and of its
            reaping; ``end`` is 0.0 when it was never reaped (clientspawn died).
        returncode: exit status, or minus the signal that ended it (-9 after the bound).
        user_s / system_s: CPU time from wait4's rusage.
        max_rss: ``ru_maxrss`` (KiB as the kernel gives it, times 1024: bytes).
        minor_faults / major_faults: ``ru_minflt`` / ``ru_majflt``.
        killed: it was killed for running past the bound.
        stdout / stderr: its output files (in the run's folder; read them before the
            folder is removed).
    """

    pid: int
    start: float
    end: float
    returncode: int
    user_s: float
    system_s: float
    max_rss: int
    minor_faults: int
    major_faults: int
    killed: bool
    stdout: Path
    stderr: Path

    @property
    def seconds(self) -> float:
        """Wall time from its release to its exit (s); 0.0 when it was never reaped."""
        return max(0.0, self.end - self.start) if self.end else 0.0

    def stderr_tail(self) -> str:
        """The last lines of its stderr (at most :data:`STDERR_TAIL` characters), joined with
        `` | ``; ``""`` when it wrote none or the file is gone."""
        try:
            text = self.stderr.read_bytes()[-4 * STDERR_TAIL:].decode("utf-8", "replace")
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text.strip().splitlines()[-3:])[-STDERR_TAIL:]


@dataclass
class SpawnRun:
    """One run of :func:`run_clients`.

    Attributes:
        clients: one :class:`ClientRun` per job, in job order.
        released: CLOCK_MONOTONIC seconds of the release; ``released_epoch`` the same moment
            on the wall clock (``time.time()`` scale).
        spawner_killed: clientspawn itself was killed past ``bound_s + GRACE_S``.
    """

    clients: list[ClientRun] = field(default_factory=list)
    released: float = 0.0
    released_epoch: float = 0.0
    spawner_killed: bool = False


def build_spawner() -> Path:
    """The clientspawn binary, compiled once per source/compiler/flags
    (runner.load.cbuild.build). Raises DriverUnavailable naming the missing compiler
    (``apt-get install build-essential``) or the compiler's error."""
    from runner.load.cbuild import CBuildError, build, find_compiler

    try:
        cc = find_compiler()
    except CBuildError as e:
        raise DriverUnavailable("no C compiler on PATH (cc, gcc or clang) to build clientspawn, which starts "
                                "the client processes; apt-get install build-essential") from e
    try:
        return build(SOURCE, "clientspawn", compiler=cc)
    except CBuildError as e:
        raise DriverUnavailable(f"clientspawn: {e}") from e


def run_clients(jobs: list[Job], *, folder: Path, bound_s: float, netns: str | None = None,
                spawner: Path | None = None) -> SpawnRun:
    """Run ``jobs`` as client processes released together (module docstring), each with
    stdin on /dev/null and stdout/stderr on ``folder/<i>.out`` / ``<i>.err``; wait until
    all have exited or been killed ``bound_s`` s after the release. As root, the clients
    run as the lab user (runner.load.tools.labuser.client_user): ``folder`` becomes
    reachable but not listable by it (labuser.open_folder) and each job's ``cwd`` inside
    ``folder`` becomes its own (labuser.give_folder); a ``cwd`` elsewhere is left as it is.

    Raises:
        ValueError: no jobs, or an argument with a tab or a newline.
        DriverUnavailable: clientspawn cannot be built (no C compiler), or this process
            is root and the lab user does not exist (the message names
            ``XFERLAB_CLIENT_USER`` and the install step).
        LoadError: clientspawn cannot be started, fails before running any client (its
            message), or ``netns`` cannot be joined.
    """
    if not jobs:
        raise ValueError("run_clients: no jobs")
    user = client_user()
    exe = spawner or build_spawner()
    lines = []
    for i, job in enumerate(jobs):
        fields = [job.cwd, str(folder / f"{i}.out"), str(folder / f"{i}.err"), *job.argv]
        if any("\t" in f or "\n" in f for f in fields):
            raise ValueError(f"client {i}: an argument contains a tab or a newline: {job.argv!r}")
        lines.append("\t".join(fields))
    jobfile = folder / "jobs.txt"
    fd = os.open(jobfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:  # passwords: readable by this user only
        os.fchmod(fd, 0o600)
        f.write("\n".join(lines) + "\n")
    if user is not None:
        open_folder(folder, user)
        top = folder.resolve()
        for job in jobs:
            cwd = Path(job.cwd).resolve()
            if cwd != top and cwd.is_relative_to(top):
                give_folder(cwd, user)
    _raise_nofile()
    out = tempfile.TemporaryFile(dir=folder)
    err = tempfile.TemporaryFile(dir=folder)
    ids = ["-u", str(user.uid), "-g", str(user.gid)] if user is not None else []
    argv = [str(exe), *ids, str(max(1, round(bound_s * 1000))), str(jobfile)]

    def start() -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        except OSError as e:
            raise LoadError(f"clientspawn: cannot start: {e}") from e

    if netns:
        from runner.net.netns import NetnsError, call_in_netns

        try:
            proc = call_in_netns(netns, start)
        except NetnsError as e:
            raise LoadError(f"clientspawn: {e}") from e
    else:
        proc = start()
    killed = False
    try:
        killed = _wait_unreaped(proc.pid, bound_s + GRACE_S)
    finally:  # the spawner is a zombie (or still running): its process group id cannot be reused yet
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    with out, err:
        out.seek(0)
        err.seek(0)
        text, errtext = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
    if proc.returncode not in (0, -signal.SIGKILL) or (not text.strip() and not killed):
        raise LoadError(f"clientspawn (exit {proc.returncode}): {errtext.strip()[-STDERR_TAIL:] or 'no output'}")
    return _parse(text, folder, len(jobs), killed)


def _wait_unreaped(pid: int, bound_s: float) -> bool:
    """Wait until ``pid`` (a child) has exited, without reaping it, at most ``bound_s`` s
    (polled every 20 ms: after the clients' exits, outside every measured time). True
    when the bound passed (the caller kills it)."""
    deadline = time.monotonic() + bound_s
    for _ in range(int(bound_s / 0.02) + 2):  # bounded
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return False
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.02)
    return True


def _parse(text: str, folder: Path, n: int, spawner_killed: bool) -> SpawnRun:
    """clientspawn's output (clientspawn.c) as a SpawnRun; clients it did not report
    (it was killed) appear as never reaped, killed."""
    run = SpawnRun(spawner_killed=spawner_killed)
    got: dict[int, ClientRun] = {}
    for line in text.splitlines():
        f = line.split()
        if f[:1] == ["released"] and len(f) == 3:
            run.released, run.released_epoch = int(f[1]) / 1e9, int(f[2]) / 1e9
        elif f[:1] == ["client"] and len(f) == 12:
            i = int(f[1])
            end = int(f[4]) / 1e9
            got[i] = ClientRun(pid=int(f[2]), start=int(f[3]) / 1e9, end=end,
                               returncode=os.waitstatus_to_exitcode(int(f[5])) if end else -signal.SIGKILL,
                               user_s=int(f[6]) / 1e6, system_s=int(f[7]) / 1e6, max_rss=int(f[8]) * 1024,
                               minor_faults=int(f[9]), major_faults=int(f[10]), killed=f[11] == "1",
                               stdout=folder / f"{i}.out", stderr=folder / f"{i}.err")
    for i in range(n):
        run.clients.append(got.get(i) or ClientRun(0, run.released, 0.0, -signal.SIGKILL, 0.0, 0.0, 0, 0, 0, True,
                                                   folder / f"{i}.out", folder / f"{i}.err"))
    return run


def _raise_nofile() -> None:
    """Raise the soft RLIMIT_NOFILE to the hard limit (children inherit it), as
    runner.load.tools.child does for its tools."""
    from runner.load.tools.child import _raise_nofile as raise_limit

    raise_limit()
