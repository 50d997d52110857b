"""Real FTP clients as drivers: the shared part of ``lftp``, ``wget`` and ``curl``
(runner.load.tools.lftp, .wget, .curl), seeds 004 and 003 (512 concurrent wget processes
downloading a 1 MB file; lftp's ``xfer:buffer-size``).

Workloads: ``retr_concurrent`` and ``stor_concurrent`` (N = ``clients`` processes, each
transferring a ``file_size`` file), and the single-stream ``retr`` and ``stor`` (one
process per transfer of the ``transfer_size`` fixture, one after another for ``duration``
s; ``elapsed_s`` is the sum of their times, each a whole client run: start-up and login
included, a few ms against a 256 MiB transfer). Each client is one process doing the whole job
(connect, login with the target's user and password, the transfer, quit); the N are
started together by runner.load.tools.spawn (released by one pipe) and each is timed from
its release to its exit, so a client's time includes its start-up, connect and login,
as seed 004's timed wget runs and seed 003's ``time lftp``. Downloads go to ``/dev/null``; each client's bytes are
its own count (wget's ``[N] -> "/dev/null"`` line, curl's ``%{size_download}``, lftp's
transfer log) and must equal the file's size. Uploads send the client-side source file
(runner.load.ftp.fixtures.client_source) as ``xferlab-stor-<token>-<i>.bin``; each is then
checked on the server (the file's size in ``target.root``, else ``SIZE`` over one ftplib
session, untimed) and deleted. Single stream: the first failed transfer ends the phase.

A client is an error when it is killed at the bound (``timeout``: ``phase_timeout`` s
after the release), exits non-zero (``client_exit``) or moves another number of bytes
(``short_transfer``); the phase's first error of each kind gets a note with the client,
its exit status and the last lines of its stderr. Figures: ``elapsed_s`` from the first
start to the last exit (single stream: the sum of the processes' times); ``bytes`` the
verified bytes; one ClientFigures per process (bytes, seconds, its ``ru_maxrss`` and
page faults); ``client_cpu_*`` the processes' summed user/system CPU (wait4). No
``loaded`` checkpoint is taken (the server sampler's timeline gives the peak).
``client_options`` (a workload parameter) pass options to the client; each driver names
those it takes (:meth:`FtpClientDriver.option_error`).
"""
from __future__ import annotations

import ftplib
import re
import secrets
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from runner.load.base import Checkpoint, LoadError, Progress
from runner.load.result import ClientFigures, PhaseResult
from runner.load.tools.child import require, tool_version
from runner.load.tools.labuser import ClientUser, client_user, open_folder, share_file
from runner.load.tools.spawn import ClientRun, Job, SpawnRun, build_spawner, run_clients

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.target import Target

WORKLOADS: tuple[str, ...] = ("stor", "retr", "retr_concurrent", "stor_concurrent")
#: The workloads that upload; the single-stream ones (one process per transfer, in a row).
UPLOADS: tuple[str, ...] = ("stor", "stor_concurrent")
SINGLE: tuple[str, ...] = ("stor", "retr")
#: Most transfers of one single-stream phase (each a process of its own).
MAX_TRANSFERS = 100_000
#: Seconds the untimed server-side check (one bounded ftplib session: login, SIZE and
#: DELE of the uploads) may take, plus :data:`CHECK_PER_FILE_S` per SIZE or DELE.
CHECK_TIMEOUT_S = 60.0
#: Seconds added to :data:`CHECK_TIMEOUT_S` per SIZE or DELE command of the check.
CHECK_PER_FILE_S = 0.5


class FtpClientDriver:
    """A real FTP client program as a driver (module docstring). Subclasses set ``name``,
    ``binary``, ``package``, ``uploads`` and implement :meth:`argv`, :meth:`client_bytes`
    and :meth:`option_error`.

    Attributes:
        name / binary / package: registry name, program, Debian package (for the skip reason).
        uploads: the client can upload (``stor_concurrent``).
        takes_client_options: the workload parameter ``client_options`` is honoured (the
            spec refuses it for drivers without this attribute).
    """

    name = ""
    binary = ""
    package = ""
    uploads = True
    protocols: tuple[str, ...] = ("ftp",)
    workloads: tuple[str, ...] = WORKLOADS
    takes_client_options = True

    # -- per client program -----------------------------------------------------------
    def argv(self, exe: str, workload: str, target: Target, params: WorkloadParams, remote: str,
             local: str) -> list[str]:
        """The command of one client: download ``remote`` to ``local`` (``/dev/null``) or
        upload ``local`` as ``remote``, run in its own folder (its working directory)."""
        raise NotImplementedError

    def client_bytes(self, workload: str, client: ClientRun, cwd: Path) -> int | None:
        """The bytes the client says it moved (its own output or log), None when it says nothing."""
        raise NotImplementedError

    def option_error(self, key: str, value: str) -> str | None:
        """Why ``key: value`` is not a client option of this client, None when it is."""
        raise NotImplementedError

    def passive_error(self, passive: str) -> str | None:
        """Why the ``passive`` mode (``pasv`` | ``epsv``) cannot be honoured, None when it can."""
        return None

    # -- the Driver protocol ----------------------------------------------------------
    def check(self) -> None:
        """Raises DriverUnavailable naming the Debian package when the program is not in
        PATH (``apt-get install wget``), when clientspawn cannot be built (no C compiler),
        or when this process is root and the lab user the clients run as is missing
        (runner.load.tools.labuser.client_user)."""
        require(self.binary, self.package)
        build_spawner()
        client_user()

    def version(self) -> str:
        """The first line of ``<binary> --version`` (``unknown`` when it cannot run)."""
        return tool_version([self.binary, "--version"])

    def refuses(self, workload: str, params: WorkloadParams) -> str | None:
        """Why this client cannot run ``workload`` with ``params`` (an upload by a client
        that cannot upload, ``same_file``, a passive mode it does not choose, an unknown or
        reserved client option, named), else None. ``login_mode`` does not apply: each
        process logs in by itself, all released at once."""
        if workload in UPLOADS and not self.uploads:
            return f"{self.name} cannot upload ({workload}); use lftp or curl"
        if workload == "stor_concurrent" and params.same_file:
            return "same_file: true is not run by the real-client drivers (each process uploads a file of its own)"
        if why := self.passive_error(params.passive):
            return why
        for key, value in params.client_options.items():
            if why := self.option_error(key, value):
                return f"client_options: {why}"
        return None

    def run(self, workload: str, target: Target, params: WorkloadParams, *,
            checkpoint: Checkpoint | None = None, progress: Progress | None = None) -> PhaseResult:
        """One phase of ``workload``: ``params.clients`` client processes released together
        (module docstring), inside ``target.netns`` when set.

        Raises:
            ValueError: a workload this driver does not run, or parameters it refuses.
            DriverUnavailable: the program is missing, or clientspawn cannot be built.
            LoadError: the download fixture cannot be placed, clientspawn fails, or the
                namespace cannot be joined.
        """
        if workload not in self.workloads:
            raise ValueError(f"driver {self.name} runs {', '.join(self.workloads)}, not {workload!r}")
        if why := self.refuses(workload, params):
            raise ValueError(f"driver {self.name}: {why}")
        exe = require(self.binary, self.package)
        spawner = build_spawner()
        user = client_user()
        notes = [f"{self.name} options: " + ", ".join(f"{k}={v}" for k, v in params.client_options.items())] \
            if params.client_options else []
        if workload in SINGLE:
            return self._single(workload, target, params, exe, spawner, user, notes, progress)
        n, size = params.clients, params.file_size
        notes.insert(0, f"{self.name}: {n} client processes released together")
        upload = workload in UPLOADS
        with tempfile.TemporaryDirectory(prefix=f"xferlab-{self.name}-") as tmp:
            folder = Path(tmp)
            _open(folder, user)
            if upload:
                local = _client_source(size, folder, user, depth=1)
                token = secrets.token_hex(4)
                remotes = [f"xferlab-stor-{token}-{i}.bin" for i in range(n)]
            else:
                local = "/dev/null"
                remotes = [_place_fixture(target, size)] * n
            jobs = []
            for i in range(n):
                cwd = folder / f"c{i}"
                cwd.mkdir()
                jobs.append(Job(self.argv(exe, workload, target, params, remotes[i], local), str(cwd)))
            if progress is not None:
                progress(f"{self.name}: {n} processes {'upload' if upload else 'download'} {size} bytes each")
            run = run_clients(jobs, folder=folder, bound_s=params.phase_timeout, netns=target.netns,
                              spawner=spawner)
            if upload:
                exited = [i for i, c in enumerate(run.clients) if c.returncode == 0]
                stored = _server_sizes(target, remotes, exited, notes)
                got = [stored.get(i) for i in range(n)]
            else:
                got = [self.client_bytes(workload, c, folder / f"c{i}") for i, c in enumerate(run.clients)]
            result = _result(self.name, workload, size, [run], got, notes)
        if progress is not None:
            progress(f"{self.name}: {result.ops}/{n} clients ok in {result.elapsed_s:.3f} s")
        return result

    def _single(self, workload: str, target: Target, params: WorkloadParams, exe: str, spawner: Path,
                user: ClientUser | None, notes: list[str], progress: Progress | None) -> PhaseResult:
        """``stor`` / ``retr``: one client process per transfer of the ``transfer_size``
        fixture, one after another until ``duration`` s have passed (at least one), all
        within ``phase_timeout``; an upload is checked on the server after each transfer
        (untimed) and deleted at the end. Stops at the first failed transfer."""
        size, upload = params.transfer_size, workload in UPLOADS
        notes.insert(0, f"{self.name}: one client process per transfer, repeated for {params.duration:g} s")
        runs: list[SpawnRun] = []
        got: list[int | None] = []
        with tempfile.TemporaryDirectory(prefix=f"xferlab-{self.name}-") as tmp:
            folder = Path(tmp)
            _open(folder, user)
            if upload:
                local, remote = _client_source(size, folder, user, depth=2), f"xferlab-stor-{secrets.token_hex(4)}.bin"
            else:
                local, remote = "/dev/null", _place_fixture(target, size)
            if progress is not None:
                progress(f"{self.name}: {workload.upper()} {size} bytes repeated for {params.duration:g} s")
            now = time.monotonic()
            stop_at, deadline = now + params.duration, now + params.phase_timeout
            argv = self.argv(exe, workload, target, params, remote, local)
            try:
                for k in range(MAX_TRANSFERS):  # bounded, and by the deadline
                    if (bound := deadline - time.monotonic()) <= 0:
                        notes.append(f"phase timeout: {params.phase_timeout:g} s passed after {k} transfers")
                        break
                    sub = folder / f"t{k}"
                    (sub / "c0").mkdir(parents=True)
                    run = run_clients([Job(argv, str(sub / "c0"))], folder=sub, bound_s=bound, netns=target.netns,
                                      spawner=spawner)
                    c = run.clients[0]
                    if upload:
                        g = _server_sizes(target, [remote], [0] if c.returncode == 0 else [], notes,
                                          delete=False).get(0)
                    else:
                        g = self.client_bytes(workload, c, sub / "c0")
                    runs.append(run)
                    got.append(g)
                    if c.returncode != 0 or c.killed or g != size or time.monotonic() >= stop_at:
                        break
            finally:
                if upload:
                    _server_sizes(target, [remote], [], notes)
            result = _result(self.name, workload, size, runs, got, notes)
        if progress is not None:
            progress(f"{self.name}: {result.ops} transfers, {result.throughput_mib_s:.1f} MiB/s")
        return result


def _result(name: str, workload: str, size: int, runs: list[SpawnRun], got: list[int | None],
            notes: list[str]) -> PhaseResult:
    """The PhaseResult of the runs of one phase (module docstring): one ClientFigures per
    process, errors by kind with a note naming the first of each kind. ``got``: the
    verified bytes of each process, in order. ``elapsed_s``: first start to last exit of
    one concurrent run, or the sum of the processes' times of a single-stream phase (the
    spans of its transfers, as runner.load.ftp.workloads sums them)."""
    procs = [c for r in runs for c in r.clients]
    figs: list[ClientFigures] = []
    errors: dict[str, int] = {}
    lat: list[float] = []
    total = ok = 0
    for i, c in enumerate(procs):
        kind = None
        if c.killed or not c.end:
            kind, what = "timeout", "killed at the phase bound"
        elif c.returncode != 0:
            kind, what = "client_exit", f"exit status {c.returncode}"
        elif got[i] != size:
            kind, what = "short_transfer", f"moved {got[i] if got[i] is not None else 'an unknown number of'} " \
                                           f"bytes, not {size}"
        if kind is not None:
            if kind not in errors:
                tail = c.stderr_tail()
                notes.append(f"first {kind}: {name} client {i} (pid {c.pid}) {what}"
                             + (f"; stderr: {tail}" if tail else ""))
            errors[kind] = errors.get(kind, 0) + 1
        nbytes = int(got[i] or 0) if kind is None else 0
        figs.append(ClientFigures(nbytes, c.seconds, kind is None, max_rss=c.max_rss,
                                  minor_faults=c.minor_faults, major_faults=c.major_faults))
        if kind is None:
            ok += 1
            total += nbytes
            lat.append(c.seconds * 1000.0)
    if any(r.spawner_killed for r in runs):
        notes.append("phase timeout: clientspawn did not end within its bound and was killed")
    if not procs:
        return PhaseResult(workload=workload, elapsed_s=0.0, notes=notes)
    first, last = runs[0], runs[-1]
    t0 = min(c.start for c in first.clients)
    t1 = max((c.end for c in last.clients if c.end), default=max(c.start for c in last.clients))
    elapsed = sum(c.seconds for c in procs) if workload in SINGLE else max(0.0, t1 - t0)
    started_at = first.released_epoch + (t0 - first.released) if first.released_epoch else None
    ended_at = last.released_epoch + (t1 - last.released) if last.released_epoch else None
    return PhaseResult(
        workload=workload, elapsed_s=elapsed, bytes=total, ops=ok, latencies_ms=lat, errors=errors, clients=figs,
        client_cpu_user_s=sum(c.user_s for c in procs), client_cpu_system_s=sum(c.system_s for c in procs),
        notes=notes, started_at=started_at, ended_at=ended_at)


def _place_fixture(target: Target, size: int) -> str:
    """The RETR fixture's name, placed on the server (runner.load.ftp.fixtures.place_server_file:
    written into ``target.root`` or uploaded by STOR). Raises LoadError naming the cause."""
    import asyncio

    from runner.load.ftp.fixtures import place_server_file
    from runner.load.ftp.replies import FTPError

    def place() -> str:
        return asyncio.run(place_server_file(target, size))

    try:
        if target.netns and target.root is None:
            from runner.net.netns import call_in_netns

            return call_in_netns(target.netns, place)
        return place()
    except (OSError, FTPError) as e:
        raise LoadError(f"download fixture of {size} bytes not placed on the server: {e}") from e


def _open(folder: Path, user: ClientUser | None) -> None:
    """Let the lab user reach (not list) the phase's folder (runner.load.tools.labuser.open_folder):
    lftp names its ``xfer.log`` by its full path, and the upload source is linked there.
    Raises LoadError."""
    try:
        open_folder(folder, user)
    except OSError as e:
        raise LoadError(f"phase folder {folder} not opened to the client user: {e}") from e


def _client_source(size: int, folder: Path, user: ClientUser | None, *, depth: int) -> str:
    """The upload source file (runner.load.ftp.fixtures.client_source) as the clients name it:
    its path when they run as this process's user; else (``user``: they run as the lab
    user, which cannot reach root's cache folder) a link to it in ``folder`` (reachable
    by the user: :func:`_open`; runner.load.tools.labuser.share_file), named relative to a client's working folder
    ``depth`` levels below ``folder`` (``../xferlab-src.bin``), so no folder above
    ``folder`` need be searchable by the user. Raises LoadError."""
    from runner.load.ftp.fixtures import client_source

    try:
        src = client_source(size)
        if user is None:
            return str(src)
        return str(Path(*[".."] * depth) / share_file(src, folder, user).name)
    except OSError as e:
        raise LoadError(f"upload source of {size} bytes not written: {e}") from e


def _server_sizes(target: Target, remotes: list[str], which: list[int], notes: list[str], *,
                  delete: bool = True) -> dict[int, int | None]:
    """Untimed: the size on the server of each uploaded ``remotes[i]`` for ``i`` in
    ``which`` (None: missing), then (``delete``) every upload deleted. From ``target.root`` when known,
    else ``SIZE``/``DELE`` over one bounded ftplib session (runner.load.bounded: the
    whole session within :data:`CHECK_TIMEOUT_S` + :data:`CHECK_PER_FILE_S` per command,
    replies capped; inside ``target.netns``); a failed check (a timeout or a reply over
    the cap included) leaves a note and the sizes it could not read as None."""
    if target.root is not None:
        out: dict[int, int | None] = {}
        for i in which:
            try:
                out[i] = (Path(target.root) / remotes[i]).stat().st_size
            except OSError:
                out[i] = None
        for name in set(remotes) if delete else ():
            try:
                (Path(target.root) / name).unlink()
            except OSError:
                pass
        return out

    from runner.load.bounded import BoundedFTP

    bound = CHECK_TIMEOUT_S + CHECK_PER_FILE_S * (len(which) + (len(set(remotes)) if delete else 0))

    def over_ftp() -> dict[int, int | None]:
        got: dict[int, int | None] = {}
        with BoundedFTP(bound) as ftp:
            ftp.connect(target.host, target.port)
            ftp.login(target.user, target.password)
            ftp.voidcmd("TYPE I")
            for i in which:
                try:
                    got[i] = ftp.size(remotes[i])
                except ftplib.error_perm:
                    got[i] = None
            for name in set(remotes) if delete else ():
                try:
                    ftp.delete(name)
                except ftplib.Error:
                    pass
        return got

    try:
        if target.netns:
            from runner.net.netns import call_in_netns

            return call_in_netns(target.netns, over_ftp)
        return over_ftp()
    except (OSError, EOFError, ftplib.Error, ValueError) as e:  # ValueError: a SIZE reply not a number
        notes.append(f"uploads not checked on the server (SIZE over FTP failed: {e})")
        return {}


def count_from(pattern: re.Pattern[str], path: Path) -> int | None:
    """The integer of ``pattern``'s first group in the file ``path`` (its last match),
    None when the file is missing or nothing matches."""
    try:
        text = path.read_text("utf-8", "replace")
    except OSError:
        return None
    found = pattern.findall(text)
    return int(found[-1]) if found else None
