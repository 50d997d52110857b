"""Backend contract: how the runner starts a server under test and reaches it.

A backend turns a :class:`ServerRequest` (server name, version, variant options) into a
running server and returns a :class:`ServerHandle`. The runner then drives load at
``handle.target`` and samples memory from ``handle.pid`` (the root of the server's
process tree).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol, Self

from runner.load.target import Target, TargetTls
from runner.metrics.cgroup_cpu import CpuStat
from runner.net.conditions import LinkError, LinkSpec, parse_link
from runner.spec.request import ServerRequest


class ServerSkipped(Exception):
    """The server cannot run here; ``str(exc)`` is the reason shown to the user
    (e.g. "vsftpd: binary /usr/sbin/vsftpd not found; apt-get install vsftpd")."""


class MachineLacks(ServerSkipped):
    """The server cannot run on this machine for want of something no install step
    provides: root (vsftpd's system accounts, a shaped link's namespaces) or a kernel
    feature (netem for a delay or a loss). A ServerSkipped, so every caller that skips
    a server skips it; tests tell it apart from a tool the install step should have put
    there (``tests.support.skips``)."""


class ServerFailed(Exception):
    """The server was expected to run but failed to build, start or answer (message says
    why: a failed build carries the builder's last lines)."""


def list_stored_files(folder: Path) -> list[tuple[str, int]]:
    """The regular files directly in ``folder`` as ``[(name, size in bytes), ...]``
    sorted by name (symlinks and sub-folders left out), for counting stored uploads.

    Raises:
        OSError: ``folder`` is missing or unreadable (FileNotFoundError when missing).
    """
    out: list[tuple[str, int]] = []
    with os.scandir(folder) as it:
        for e in it:
            if e.is_file(follow_symlinks=False):
                try:
                    out.append((e.name, e.stat(follow_symlinks=False).st_size))
                except FileNotFoundError:  # removed while listing
                    continue
    out.sort()
    return out


def remove_stored_files(folder: Path, names: list[str]) -> int:
    """Delete the files ``names`` (plain names, no ``/``) directly in ``folder``; a name
    already gone is skipped. Returns how many were deleted.

    Raises:
        ValueError: a name holds ``/`` or is ``.``/``..``.
        OSError: a file cannot be deleted (other than missing).
    """
    n = 0
    for name in names:
        if "/" in name or name in ("", ".", ".."):
            raise ValueError(f"not a plain file name: {name!r}")
        try:
            (folder / name).unlink()
            n += 1
        except FileNotFoundError:
            continue
    return n


class ServerHandle(Protocol):
    """A running server. ``stop()`` is idempotent and never raises for an already-dead server."""

    target: Target
    pid: int | None  # root of the process tree to sample; None if unknown (external without pid)
    build_info: dict[str, Any]  # name, version, variant, binary path, config hash, ...

    def stop(self) -> None: ...

    def alive(self) -> bool: ...

    def exit_reason(self) -> str | None:
        """Why the server is not running (after alive() returned False), e.g.
        ``"container exited (exit code 137)"``; None while running or when the backend
        cannot tell."""
        ...

    def cgroup_memory(self) -> dict[str, float] | None:
        """The server's own memory cgroup now, bytes (``current``, ``peak``, ``anon``),
        stored as metric ``server_cgroup_mem``; None when the server has no cgroup of its
        own (local process, external server); {} when it is gone."""
        ...

    def cgroup_cpu(self) -> CpuStat | None:
        """CPU counters of the server's own cgroup now (runner.metrics.cgroup_cpu.CpuStat,
        microseconds), covering every process of the server, exited ones included: the
        container's cgroup (docker), the cgroup v2 the lab made for it (local). None when
        the server has no cgroup of its own (external; local where no cgroup v2 could be
        made) or it is gone. The difference of two readings is a phase's server CPU."""
        ...

    def stored_files(self, subdir: str = "uploads") -> list[tuple[str, int]]:
        """The regular files directly in ``<home>/<subdir>`` of the server (e.g. the
        HTTP uploads a phase stored) as ``[(name, size in bytes), ...]`` sorted by name.
        Local backend: the run home; docker: the container's ``/srv/ftp`` (read through
        ``/proc/<pid>/root``, else ``find`` run in the container).

        Raises:
            OSError: the folder is missing or cannot be read (FileNotFoundError when
                missing; external servers without a local ``Target.root``: OSError).
            ValueError: ``subdir`` is absolute or has a ``..`` segment.
        """
        ...

    def remove_stored(self, subdir: str, names: list[str]) -> None:
        """Delete the files ``names`` (as :meth:`stored_files` lists them) from
        ``<home>/<subdir>`` (the stored-file check, runner.cell.upload_check, deletes a
        phase's uploads). Optional: a handle without it keeps the files.

        Raises:
            OSError: the files cannot be deleted (external servers without ``root``).
            ValueError: a bad ``subdir`` or a name with ``/``.
        """
        ...


class StopsOnExit:
    """A server handle as a context manager: ``with handle:`` gives the handle and calls
    its ``stop()`` on the way out, whatever raised (the exception goes on)."""

    def stop(self) -> None:
        """Stop the server (the handle's own; :class:`ServerHandle`)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Backend(Protocol):
    """Starts servers. Implementations: runner.backends.local.LocalBackend."""

    name: str

    def check(self, req: ServerRequest) -> None:
        """Raise ServerSkipped with the reason when ``req`` cannot run here; else return."""

    def start(self, req: ServerRequest, *, cpu: list[int] | None = None) -> ServerHandle:
        """Start the server (pinned to ``cpu`` cores if given), wait until it answers FTP
        (220 greeting and login; an HTTP-only server: any HTTP reply), and return its
        handle. Raises ServerSkipped or ServerFailed."""


def check_subdir(subdir: str) -> str:
    """``subdir`` as a relative folder under a server's home (``"uploads"``).

    Raises:
        ValueError: absolute, empty segments aside, or with a ``..`` segment.
    """
    if subdir.startswith("/") or ".." in subdir.split("/"):
        raise ValueError(f"subdir must be relative, without '..': {subdir!r}")
    return subdir.strip("/")


def tls_mode(req: ServerRequest) -> str | None:
    """The request's FTPS mode (``explicit``/``implicit``), or None for plain FTP.

    Raises:
        ServerSkipped: the variant asks for TLS but the request carries no certificates
            (``ServerRequest.tls``, set by the cell runner from the campaign's).
    """
    mode = str(req.variant.get("tls", "none"))
    if mode == "none":
        return None
    if req.tls is None:
        raise ServerSkipped(f"{req.name}: tls={mode} but no certificates were given (ServerRequest.tls)")
    return mode


def target_tls(req: ServerRequest) -> TargetTls | None:
    """The client side of the request's FTPS (:class:`TargetTls`), None for plain FTP."""
    mode = tls_mode(req)
    if mode is None:
        return None
    return TargetTls(mode, str(req.tls.ca_cert), req.tls.server_name, req.tls.key_type)


def request_link(req: ServerRequest) -> LinkSpec:
    """The link of ``req`` (its variant's ``link``, default loopback).

    Raises:
        ServerSkipped: the variant's link is not valid (the spec normally refuses it first).
    """
    try:
        return parse_link(req.variant.get("link", "loopback"))
    except LinkError as e:
        raise ServerSkipped(f"{req.label}: {e}") from None
