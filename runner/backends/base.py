"""Backend contract: how the runner starts a server under test and reaches it.

A backend turns a :class:`ServerRequest` (server name, version, variant options) into a
running server and returns a :class:`ServerHandle`. The runner then drives load at
``handle.target`` and samples memory from ``handle.pid`` (the root of the server's
process tree).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


class ServerSkipped(Exception):
    """The server cannot run here; ``str(exc)`` is the reason shown to the user
    (e.g. "vsftpd: binary /usr/sbin/vsftpd not found; apt-get install vsftpd")."""


class ServerFailed(Exception):
    """The server was expected to run but failed to start or answer (message says why)."""


@dataclass(frozen=True)
class TargetTls:
    """How the load generator speaks TLS to a target (FTPS, RFC 4217).

    Attributes:
        mode: ``"explicit"`` (greeting, ``AUTH TLS``, handshake, ``PBSZ 0``, ``PROT P``)
            or ``"implicit"`` (TLS from the first byte on ``Target.port``).
        ca_file: PEM file of the CA the server certificate must chain to.
        server_name: the DNS name verified in the certificate (SNI too), e.g.
            ``"xferlab-server"`` (runner.backends.certs.SERVER_NAME).
        key_type: the server key's type (``ecdsa-p256``, ``rsa-2048``), recorded per cell.
    """

    mode: str
    ca_file: str
    server_name: str
    key_type: str


@dataclass(frozen=True)
class Target:
    """Where the load generator connects.

    Attributes:
        host: IP address (loopback in tests), e.g. ``"127.0.0.1"``.
        port: FTP control port; 0 for a server that speaks no FTP (HTTP only:
            go-http, nginx, node-http, uvicorn, netty; see :attr:`speaks_ftp`).
        user / password: login credentials (FTP; an HTTP-only server has no login:
            ``user`` is ``xferlab`` and ``password`` empty).
        root: server-side home directory (FTP root, HTTP document root) as a path this
            process can read and write, else None. Fixtures are placed there. The local
            backend's run home; the docker backend gives, for an HTTP-only server,
            ``/proc/<server pid>/root/srv/ftp`` when this process may enter it (root),
            else None (FTP servers in containers: None, fixtures go up over FTP).
        http_port: HTTP port for servers that speak HTTP (tpd, go-http, nginx,
            node-http, uvicorn, netty), else None; with the docker backend in ``netns`` or
            ``bridge`` mode the port inside the container (8080).
        netns: a network namespace file (``/proc/<pid>/ns/net``) the load generator
            must join to reach ``host`` (docker backend, network ``netns``: the
            server's own namespace, reached over its loopback), else None: connect
            from where the load generator runs. A driver that cannot honour it must
            refuse the target (runner.backends.netns.call_in_netns does the joining).
        tls: FTPS settings when the server runs with the ``tls`` variant, else None
            (plain FTP). With implicit FTPS, ``port`` is the implicit listener.
    """

    host: str
    port: int
    user: str
    password: str
    root: Path | None = None
    http_port: int | None = None
    netns: str | None = None
    tls: TargetTls | None = None

    @property
    def speaks_ftp(self) -> bool:
        """True when the server has an FTP listener (``port`` is not 0)."""
        return self.port != 0


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


@dataclass(frozen=True)
class ServerRequest:
    """One server build to run, as the campaign spec names it.

    Attributes:
        name: server kind: ``pyftpdlib``, ``twisted``, ``vsftpd``, ``proftpd``,
            ``pureftpd``, ``tpd``, ``go-http``, ``nginx``, ``node-http``, ``uvicorn``, ``netty`` or
            ``external`` (runner.backends.catalogue: the protocols of each).
        version: version string for servers installed per version (pyftpdlib,
            twisted), None for "what is installed" / not applicable.
        variant: variant options, e.g. ``{"use_sendfile": False}``.
        external: for ``name == "external"``: host, port, user, password, pid.
        max_clients: connection limit to configure (the seed's 2000).
        tls: the campaign's certificate files (runner.backends.certs.TlsFiles) for a
            request whose variant has ``tls`` explicit/implicit, set by the cell runner;
            None otherwise.
    """

    name: str
    version: str | None = None
    variant: dict[str, Any] = field(default_factory=dict)
    external: dict[str, Any] = field(default_factory=dict)
    max_clients: int = 2000
    tls: Any = None

    @property
    def label(self) -> str:
        """Human label, e.g. ``"pyftpdlib 2.2.0"`` or ``"pyftpdlib 2.2.0 [use_sendfile=False]"``."""
        s = self.name if not self.version else f"{self.name} {self.version}"
        if self.variant:
            s += " [" + ",".join(f"{k}={v}" for k, v in sorted(self.variant.items())) + "]"
        return s


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
        ``<home>/<subdir>`` (the stored-file check, runner.upload_check, deletes a
        phase's uploads). Optional: a handle without it keeps the files.

        Raises:
            OSError: the files cannot be deleted (external servers without ``root``).
            ValueError: a bad ``subdir`` or a name with ``/``.
        """
        ...


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
