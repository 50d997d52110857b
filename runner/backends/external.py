"""The ``external`` server: one xferlab did not start (``ServerRequest.external``:
host, port, user, password, optional pid, root, http_port). Both backends use it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil

from runner.backends.base import ServerFailed, ServerSkipped, check_subdir, list_stored_files, remove_stored_files
from runner.backends.probe import ProbeError, probe_once, wait_ready
from runner.load.target import Target
from runner.spec.request import ServerRequest


class ExternalHandle:
    """A server xferlab did not start. ``stop()`` does nothing; ``pid`` is the given
    pid (memory is sampled from it) or None."""

    def __init__(self, target: Target, pid: int | None, build_info: dict[str, Any]):
        self.target = target
        self.pid = pid
        self.build_info = build_info

    def alive(self) -> bool:
        """pid given: whether it exists; else whether the FTP port answers a login within
        3 s (one bounded exchange: runner.backends.probe.probe_once)."""
        if self.pid is not None:
            return psutil.pid_exists(self.pid)
        try:
            probe_once(self.target.host, self.target.port, self.target.user, self.target.password)
            return True
        except Exception:
            return False

    def exit_reason(self) -> str | None:
        """None while alive; else ``"pid N gone"`` or ``"no FTP login at HOST:PORT"``."""
        if self.alive():
            return None
        if self.pid is not None:
            return f"pid {self.pid} gone"
        return f"no FTP login at {self.target.host}:{self.target.port}"

    def cgroup_memory(self) -> dict | None:
        """None: xferlab does not know an external server's cgroup."""
        return None

    def cgroup_cpu(self) -> None:
        """None: xferlab does not know an external server's cgroup."""
        return None

    def stored_files(self, subdir: str = "uploads") -> list[tuple[str, int]]:
        """The files in ``<root>/<subdir>`` (base.ServerHandle.stored_files) when the
        external server's ``root`` was given as a local path. Raises OSError when it was
        not (xferlab cannot see the server's files) or the folder cannot be read."""
        if self.target.root is None:
            raise OSError(f"external server {self.target.host}:{self.target.port}: no root given, "
                          "its stored files cannot be listed")
        return list_stored_files(self.target.root / check_subdir(subdir))

    def remove_stored(self, subdir: str, names: list[str]) -> None:
        """Delete ``names`` from ``<root>/<subdir>`` when ``root`` was given (else
        OSError, as :meth:`stored_files`); base.ServerHandle.remove_stored."""
        if self.target.root is None:
            raise OSError(f"external server {self.target.host}:{self.target.port}: no root given, "
                          "its stored files cannot be deleted")
        remove_stored_files(self.target.root / check_subdir(subdir), names)

    def stop(self) -> None:
        """No-op: xferlab does not own external servers."""


def external_target(req: ServerRequest) -> Target:
    """The Target of ``req.external``. Raises ServerSkipped when host or port is missing."""
    ext = req.external
    if not ext or "host" not in ext or "port" not in ext:
        raise ServerSkipped("external: ServerRequest.external needs at least host and port")
    return Target(str(ext["host"]), int(ext["port"]), str(ext.get("user", "anonymous")),
                  str(ext.get("password", "")), Path(ext["root"]) if ext.get("root") else None,
                  int(ext["http_port"]) if ext.get("http_port") else None)


def check_external(req: ServerRequest) -> None:
    """Raise ServerSkipped when host/port are missing or the server does not answer a
    login within 5 s (one bounded exchange, connect to QUIT: a server that drips or
    floods reply lines is skipped with the deadline or cap it hit)."""
    external_target(req)
    ext = req.external
    try:
        probe_once(ext["host"], int(ext["port"]), ext.get("user", "anonymous"),
                   ext.get("password", ""), timeout=5)
    except Exception as e:
        raise ServerSkipped(f"external {ext['host']}:{ext['port']}: no FTP login: {e}") from e


def start_external(req: ServerRequest, ready_timeout: float | None) -> ExternalHandle:
    """Wait (``ready_timeout`` s, default 10) for the external server's greeting + login
    and return its handle. Raises ServerSkipped (no host/port) or ServerFailed."""
    target = external_target(req)
    try:
        greeting, _ = wait_ready(target.host, target.port, target.user, target.password,
                                 timeout=ready_timeout or 10)
    except ProbeError as e:
        raise ServerFailed(f"external {target.host}:{target.port}: {e}") from e
    pid = req.external.get("pid")
    info = {"name": "external", "version": req.version, "variant": dict(req.variant),
            "binary": None, "interpreter": None, "config_hash": None,
            "obtained": "external", "greeting": greeting, "pid": pid}
    return ExternalHandle(target, int(pid) if pid is not None else None, info)
