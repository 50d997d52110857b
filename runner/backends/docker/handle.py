"""A server running in a container: its host PID, liveness, memory and CPU cgroup, stop."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import docker.errors
import psutil

from runner.backends.base import StopsOnExit, check_subdir, list_stored_files, remove_stored_files
from runner.backends.docker.container import FTP_HOME
from runner.load.target import Target
from runner.metrics.cgroup import cgroup_dir, from_engine_stats, read_cgroup_memory
from runner.metrics.cgroup_cpu import CpuCgroup, CpuStat, cpu_cgroup, from_engine_cpu_stats


class DockerServerHandle(StopsOnExit):
    """A server running in a container started by
    :class:`runner.backends.docker.backend.DockerBackend` (implements base.ServerHandle).
    ``client`` is the backend's Docker SDK client (to remove the container's volume);
    ``stop_timeout`` the seconds between SIGTERM and SIGKILL in :meth:`stop`.

    Attributes:
        target: where to connect (container address on the bridge, or the bind address
            with host networking); ``root`` is None: fixtures are uploaded over FTP.
        pid: host PID of the server process (the child of the container's docker-init,
            i.e. its main process), for TreeSampler.
        build_info: name, version, image_id, image_tag, container, network, storage,
            memory_limit, cpuset, sysctls, rlimit_nofile, config_hash, greeting, startup_s.
        container_id: the container's full ID.
    """

    def __init__(self, client: Any, container, target: Target, build_info: dict[str, Any],
                 volume: str | None, *, stop_timeout: float):
        self._client = client
        self._stop_timeout = stop_timeout
        self._container = container
        self.container_id: str = container.id
        self.target = target
        self.pid: int | None = None
        self.build_info = build_info
        self._volume = volume
        self._stopped = False
        self._cg: tuple[Path, int] | None = None
        self._cpu_cg: CpuCgroup | None = None
        self._exit: str | None = None
        self.link: Any = None  # a runner.net.link.LinkNet into the container's namespace, closed by stop()

    def _attach_pid(self, timeout: float = 5.0) -> None:
        """Set ``pid`` to the server process: the child of the container's init
        (``State.Pid``, docker-init), waiting up to ``timeout`` s for the entrypoint to exec it;
        ``State.Pid`` itself when the container runs without init."""
        self._container.reload()
        init_pid = int(self._container.attrs["State"].get("Pid") or 0)
        self.pid = init_pid or None
        self._cg = cgroup_dir(init_pid) if init_pid else None
        self._cpu_cg = cpu_cgroup(init_pid) if init_pid else None
        self.build_info["cpu_cgroup"] = (f"{self._cpu_cg.acct}" if self._cpu_cg is not None
                                         else "engine: the container's cgroup files are not visible here")
        if not init_pid or not self._container.attrs["HostConfig"].get("Init"):
            return
        deadline = time.monotonic() + timeout
        for _ in range(200):
            try:
                kids = psutil.Process(init_pid).children()
            except psutil.Error:
                return
            if kids:
                self.pid = kids[0].pid
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.025)

    def record_storage_fs(self, home: str) -> None:
        """Set ``build_info["storage_fs"]``: the filesystem type the server's ``home``
        is on, as the server process sees it (its /proc/<pid>/mountinfo), e.g.
        ``tmpfs`` or ``ext4``; ``""`` when it cannot be read. The local backend
        records the same key (runner.backends.local.rundir)."""
        self.build_info["storage_fs"] = mount_fs_type(self.pid, home) if self.pid else ""

    def bridge_address(self) -> str:
        """The container's IP address on its bridge network ("" when it has none)."""
        ns = self._container.attrs["NetworkSettings"]
        ip = ns.get("IPAddress") or ""
        if not ip:
            nets = ns.get("Networks") or {}
            ip = next((n.get("IPAddress") for n in nets.values() if n.get("IPAddress")), "")
        return ip

    def alive(self) -> bool:
        """True while the container is running (asks the engine)."""
        if self._stopped:
            return False
        try:
            self._container.reload()
        except docker.errors.NotFound:
            self._exit = "container removed"
            return False
        st = self._container.attrs["State"]
        if st.get("Running"):
            return True
        self._exit = (f"container {st.get('Status')} (exit code {st.get('ExitCode')}"
                      + (", OOM-killed" if st.get("OOMKilled") else "") + ")")
        return False

    def exit_reason(self) -> str | None:
        """Why the container is not running (after alive() returned False), e.g.
        ``"container exited (exit code 137)"``; None while running."""
        return None if self.alive() else self._exit

    def cgroup_memory(self) -> dict | None:
        """The container's memory cgroup now, bytes: ``current``, ``peak`` (since the
        container started), ``anon`` (see :func:`runner.metrics.cgroup.read_cgroup_memory`).
        Falls back to the engine's stats API (:func:`runner.metrics.cgroup.from_engine_stats`)
        when the cgroup files are not visible here. Returns {} when the container is gone."""
        if self._cg is not None:
            try:
                return read_cgroup_memory(*self._cg)
            except OSError:
                return {}
        try:
            ms = self._container.stats(stream=False).get("memory_stats") or {}
        except docker.errors.APIError:
            return {}
        return from_engine_stats(ms)

    def cgroup_cpu(self) -> CpuStat | None:
        """The container cgroup's CPU counters now (runner.metrics.cgroup_cpu.CpuStat,
        microseconds: usage, user, system, throttled periods and time), covering every
        process of the container, those that exited included. Falls back to the engine's
        stats API (``cpu_stats``) when the cgroup files are not visible here. None when the
        container is gone."""
        if self._cpu_cg is not None:
            try:
                return self._cpu_cg.read()
            except (OSError, ValueError, KeyError):
                return None
        try:
            cs = self._container.stats(stream=False).get("cpu_stats") or {}
        except docker.errors.APIError:
            return None
        return from_engine_cpu_stats(cs)

    def stored_files(self, subdir: str = "uploads") -> list[tuple[str, int]]:
        """The regular files directly in the container's ``/srv/ftp/<subdir>`` as
        ``[(name, size in bytes), ...]`` sorted by name (base.ServerHandle.stored_files):
        read through ``/proc/<pid>/root`` when this process may (root on the engine's
        host), else listed by ``find`` run in the container (findutils is in every
        Debian image).

        Raises:
            OSError: the folder is missing (FileNotFoundError) or the container is gone.
            ValueError: ``subdir`` is absolute or has a ``..`` segment.
        """
        sub = check_subdir(subdir)
        home = home_path(self.pid) if self.pid else None
        if home is not None:
            return list_stored_files(home / sub)
        folder = f"{FTP_HOME}/{sub}".rstrip("/")
        try:
            code, out = self._container.exec_run(["find", folder, "-maxdepth", "1", "-type", "f",
                                                  "-printf", "%f\\t%s\\n"])
        except docker.errors.APIError as e:
            raise OSError(f"container {self.container_id[:12]}: cannot list {folder}: {e}") from e
        text = out.decode("utf-8", "replace")
        if code != 0:
            if "No such file" in text:
                raise FileNotFoundError(f"container {self.container_id[:12]}: {folder}: no such folder")
            raise OSError(f"container {self.container_id[:12]}: find {folder} exited {code}: {text[-300:]}")
        rows = [line.rpartition("\t") for line in text.splitlines() if "\t" in line]
        return sorted((name, int(size)) for name, _, size in rows)

    def remove_stored(self, subdir: str, names: list[str]) -> None:
        """Delete ``names`` from the container's ``/srv/ftp/<subdir>``
        (base.ServerHandle.remove_stored): through ``/proc/<pid>/root`` when this process
        may, else ``rm -f`` run in the container, 1,000 names a call.

        Raises:
            OSError: the container is gone or rm failed.
            ValueError: a bad ``subdir`` or a name with ``/``.
        """
        sub = check_subdir(subdir)
        home = home_path(self.pid) if self.pid else None
        if home is not None:
            remove_stored_files(home / sub, names)
            return
        if any("/" in n or n in ("", ".", "..") for n in names):
            raise ValueError("not plain file names")
        folder = f"{FTP_HOME}/{sub}".rstrip("/")
        for i in range(0, len(names), 1000):
            argv = ["rm", "-f", "--", *(f"{folder}/{n}" for n in names[i:i + 1000])]
            try:
                code, out = self._container.exec_run(argv)
            except docker.errors.APIError as e:
                raise OSError(f"container {self.container_id[:12]}: cannot delete in {folder}: {e}") from e
            if code != 0:
                raise OSError(f"container {self.container_id[:12]}: rm in {folder} exited {code}: "
                              f"{out.decode('utf-8', 'replace')[-300:]}")

    def log_tail(self, lines: int = 40) -> str:
        """Last ``lines`` lines of the container's stdout+stderr ("" when gone)."""
        try:
            return self._container.logs(tail=lines).decode("utf-8", "replace").strip()
        except docker.errors.APIError:
            return ""

    def stop(self) -> None:
        """Stop (SIGTERM, then SIGKILL after the backend's stop_timeout) and remove
        the container and its volume. Idempotent; never raises for a dead container."""
        if self._stopped:
            return
        self._stopped = True
        if self._stop_timeout > 0:
            try:
                self._container.stop(timeout=max(1, int(self._stop_timeout)))
            except docker.errors.APIError:
                pass
        try:
            self._container.remove(force=True, v=True)
        except docker.errors.APIError:
            pass
        if self._volume:
            for _ in range(20):
                try:
                    self._client.volumes.get(self._volume).remove(force=True)
                    break
                except docker.errors.NotFound:
                    break
                except docker.errors.APIError:  # still in use for a moment after removal
                    time.sleep(0.1)
        if self.link is not None:
            self.link.close()


def mount_fs_type(pid: int, path: str) -> str:
    """Filesystem type of the mount holding ``path`` in the mount namespace of process
    ``pid``: the longest mount point of ``/proc/<pid>/mountinfo`` (proc(5): field 5 is
    the mount point, the field after the ``-`` separator the type) that is ``path`` or
    one of its parents. Returns ``""`` when the file cannot be read or nothing matches."""
    try:
        text = Path(f"/proc/{pid}/mountinfo").read_text()
    except OSError:
        return ""
    best, fs = -1, ""
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields or len(fields) < 5:
            continue
        point = fields[4].replace("\\040", " ")
        sep = fields.index("-")
        if sep + 1 >= len(fields):
            continue
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, fs = len(point), fields[sep + 1]
    return fs



def home_path(pid: int | None) -> Path | None:
    """The container's home (``/srv/ftp``) as a path of this host's filesystem:
    ``/proc/<pid>/root/srv/ftp`` for the server process ``pid``, when it is a folder this
    process may read and write (root, or the container's user); None otherwise."""
    if not pid:
        return None
    p = Path(f"/proc/{pid}/root{FTP_HOME}")
    try:
        return p if p.is_dir() and os.access(p, os.R_OK | os.W_OK | os.X_OK) else None
    except OSError:
        return None
