"""Process control of a local server: how it is spawned (own session, RLIMIT_NOFILE,
CPU pinning, death signal), waited for, and stopped with its whole process tree."""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
from collections.abc import Callable
from typing import Any

import psutil

from runner.backends.base import ServerFailed, StopsOnExit, check_subdir, list_stored_files, remove_stored_files
from runner.backends.local.recipes.base import Launch, sha256
from runner.backends.local.rundir import RunDir, log_tail
from runner.backends.probe import ProbeError, wait_http_ready, wait_ready
from runner.backends.system import nofile_target
from runner.load.target import Target
from runner.metrics import server_cgroup
from runner.metrics.cgroup_cpu import CpuStat
from runner.metrics.tree import tree
from runner.net.netns import CLONE_NEWNET, call_in_netns
from runner.spec.request import ServerRequest


def make_preexec(cpu: list[int] | None, netns_fd: int | None = None,
                 cgroup_procs: str | None = None) -> Callable[[], None]:
    """The function the child runs between fork and exec: joining the cgroup whose
    ``cgroup.procs`` file is ``cgroup_procs`` when given (runner.metrics.server_cgroup, so
    every process the server forks is born in it), PR_SET_PDEATHSIG SIGKILL
    (prctl(2)), RLIMIT_NOFILE soft = hard (as root the hard limit raised to
    ``min(fs.nr_open, 1048576)`` where the kernel allows it), ``sched_setaffinity``
    to ``cpu`` when given (forked per-client processes inherit it), and setns(2) into
    the network namespace open as ``netns_fd`` when given (a shaped link's server side,
    runner.net.link; the child exits 126 when it cannot join)."""
    hard_target = nofile_target()
    is_root = os.geteuid() == 0
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    def preexec() -> None:  # runs in the child between fork and exec
        if cgroup_procs is not None:
            server_cgroup.join_in_child(cgroup_procs)
        # PR_SET_PDEATHSIG (prctl(2), option 1): the server gets SIGKILL when the runner
        # dies, so a killed campaign leaves no orphaned server behind.
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if is_root and hard != resource.RLIM_INFINITY and hard < hard_target:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (hard_target, hard_target))
                hard = hard_target
            except (ValueError, OSError):
                pass
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
        if cpu:
            os.sched_setaffinity(0, cpu)
        if netns_fd is not None and libc.setns(netns_fd, CLONE_NEWNET) != 0:
            os._exit(126)

    return preexec


class LocalServerHandle(StopsOnExit):
    """A server started by :class:`~runner.backends.local.LocalBackend` (implements
    base.ServerHandle).

    Attributes:
        target: where to connect.
        pid: root pid of the server's process tree (its own process group).
        build_info: name, version, variant, binary, interpreter, config_hash, obtained,
            run_dir, argv, startup_s, greeting, cpu.
        run_dir: the run dir (removed by stop() unless the backend keeps run dirs).
        cgroup: the cgroup v2 made for the server's process tree
            (runner.metrics.server_cgroup), None when none could be made or joined
            (``build_info["cpu_cgroup"]`` then says why).
    """

    def __init__(self, proc: subprocess.Popen, target: Target, build_info: dict[str, Any],
                 run: RunDir, keep_run_dir: bool, stop_timeout: float,
                 cgroup: server_cgroup.ServerCgroup | None = None):
        self.cgroup = cgroup
        self._proc = proc
        self.target = target
        self.pid: int | None = proc.pid
        self.build_info = build_info
        self.run_dir = run.path
        self._run = run
        self._keep = keep_run_dir
        self._stop_timeout = stop_timeout
        self._stopped = False
        self.link: Any = None  # a runner.net.link.LinkNet the server is reached over, closed by stop()

    def alive(self) -> bool:
        """True while the root server process has not exited."""
        return not self._stopped and self._proc.poll() is None

    def exit_reason(self) -> str | None:
        """Why the server is not running, e.g. ``"exit code 3"``, ``"killed by SIGKILL"``
        or ``"stopped by xferlab"``; None while it runs."""
        if self.alive():
            return None
        code = self._proc.poll()
        if code is None:
            return "stopped by xferlab"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def cgroup_memory(self) -> dict | None:
        """None: a local server has no memory cgroup of its own (its memory is the
        process tree's, sampled from ``pid``)."""
        return None

    def cgroup_cpu(self) -> CpuStat | None:
        """The CPU counters of the cgroup made for the server's process tree
        (runner.metrics.cgroup_cpu.CpuStat, microseconds); None without one (no cgroup v2
        could be made here: ``build_info["cpu_cgroup"]`` says why) or when it is gone."""
        if self.cgroup is None:
            return None
        try:
            return self.cgroup.cpu.read()
        except (OSError, ValueError, KeyError):
            return None

    def stored_files(self, subdir: str = "uploads") -> list[tuple[str, int]]:
        """The regular files directly in ``<run home>/<subdir>`` as ``[(name, size in
        bytes), ...]`` sorted by name (base.ServerHandle.stored_files). Raises OSError
        (FileNotFoundError when the folder is missing), ValueError for a bad ``subdir``."""
        return list_stored_files(self._run.home / check_subdir(subdir))

    def remove_stored(self, subdir: str, names: list[str]) -> None:
        """Delete ``names`` from ``<run home>/<subdir>`` (base.ServerHandle.remove_stored;
        base.remove_stored_files). Raises OSError, ValueError."""
        remove_stored_files(self._run.home / check_subdir(subdir), names)

    def log_tail(self) -> str:
        """Tail of the server's log files (for error messages)."""
        return log_tail(self._run.logs)

    def stop(self) -> None:
        """SIGTERM the process group and every descendant, wait up to ``stop_timeout``
        seconds, then SIGKILL what is left; reap the root; remove the run dir (unless
        kept). Idempotent; never raises for an already-dead server."""
        if self._stopped:
            return
        self._stopped = True
        procs = tree(self._proc.pid)  # descendants that left our process group too
        pgid = self._proc.pid  # start_new_session: pgid == pid
        for sig, wait in ((signal.SIGTERM, self._stop_timeout), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            for p in procs:
                try:
                    p.send_signal(sig)
                except psutil.Error:
                    pass
            try:
                self._proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            _, left = psutil.wait_procs([p for p in procs if p.pid != self._proc.pid], timeout=wait)
            if not left:
                break
            procs = left
        try:
            self._proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        if not self._keep:
            shutil.rmtree(self._run.path, ignore_errors=True)
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.link is not None:
            self.link.close()


def spawn(req: ServerRequest, launch: Launch, run: RunDir, cpu: list[int] | None, *,
          keep_run_dir: bool, stop_timeout: float, ready_timeout: float | None,
          netns: str | None = None) -> LocalServerHandle:
    """Start ``launch.argv`` in ``run`` (own session, output to ``logs/server.log``,
    :func:`make_preexec`) and wait for greeting + login (``ready_timeout`` s, default
    the launch's). With ``netns`` (a namespace file) the server runs in that network
    namespace and is probed from it.

    The server joins a cgroup v2 of its own (runner.metrics.server_cgroup) before it
    execs; ``build_info["cpu_cgroup"]`` is that cgroup's folder, or ``"none: REASON"``
    when none could be made or joined (its CPU is then the process tree's).

    Returns the handle with build_info complete (greeting, startup_s, pid, rlimit_nofile,
    cpu_cgroup).
    Raises ServerFailed (argv and log tail in the message) when it cannot be executed,
    exits, or does not answer in time; the server is stopped then."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(launch.env)
    log = open(run.logs / "server.log", "wb")
    ns_fd = os.open(netns, os.O_RDONLY | os.O_CLOEXEC) if netns else None
    cgroup: server_cgroup.ServerCgroup | None = None
    try:
        cgroup = server_cgroup.make()
        cgroup_note = str(cgroup.path)
    except server_cgroup.NoServerCgroup as e:
        cgroup_note = f"none: {e}"
    try:
        proc = subprocess.Popen(launch.argv, cwd=run.path, env=env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=make_preexec(cpu, ns_fd, cgroup.procs_file if cgroup else None),
                                close_fds=True)
    except OSError as e:
        if cgroup is not None:
            cgroup.remove()
        raise ServerFailed(f"{req.label}: cannot execute {launch.argv[0]}: {e}") from e
    finally:
        log.close()
        if ns_fd is not None:
            os.close(ns_fd)
    info = {"name": req.name, "variant": dict(req.variant), "label": req.label,
            **launch.info, "config_hash": sha256(launch.config_text),
            "run_dir": str(run.path), "argv": [a if a != launch.target.password else "***"
                                               for a in launch.argv],
            "cpu": list(cpu) if cpu else None, "max_clients": req.max_clients,
            "requested_version": req.version, "storage": run.storage, "storage_fs": run.fs_type,
            **({"tls_mode": launch.target.tls.mode, "tls_key_type": launch.target.tls.key_type}
               if launch.target.tls is not None else {})}
    if cgroup is not None and not cgroup.contains(proc.pid):
        cgroup_note = f"none: the server did not join {cgroup.path}"
        cgroup.remove(timeout=0)
        cgroup = None
    info["cpu_cgroup"] = cgroup_note
    handle = LocalServerHandle(proc, launch.target, info, run, keep_run_dir, stop_timeout, cgroup)
    t = launch.target

    def probe() -> tuple[str, float]:
        if t.speaks_ftp:
            return wait_ready(t.host, t.port, t.user, t.password, timeout=ready_timeout or launch.ready_timeout,
                              alive=lambda: proc.poll() is None, tls=t.tls)
        assert t.http_port is not None, "a server without FTP must have an HTTP port"  # HTTP only: any reply
        return wait_http_ready(t.host, t.http_port, timeout=ready_timeout or launch.ready_timeout,
                               alive=lambda: proc.poll() is None, tls=t.tls)

    try:
        greeting, waited = call_in_netns(netns, probe) if netns else probe()
    except ProbeError as e:
        code = proc.poll()
        tail = log_tail(run.logs)
        handle.stop()
        raise ServerFailed(f"{req.label}: {e}" + (f" (exit code {code})" if code is not None else "")
                           + f"\nargv: {' '.join(info['argv'])}\n{tail}") from e
    info["greeting"] = greeting
    info["startup_s"] = round(waited, 3)
    info["pid"] = proc.pid
    try:
        info["rlimit_nofile"] = list(psutil.Process(proc.pid).rlimit(psutil.RLIMIT_NOFILE))
    except psutil.Error:
        info["rlimit_nofile"] = None
    return handle
