"""Backend contract: how the runner starts a server under test and reaches it.

A backend turns a :class:`ServerRequest` (server name, version, variant options) into a
running server and returns a :class:`ServerHandle`. The runner then drives load at
``handle.target`` and samples memory from ``handle.pid`` (the root of the server's
process tree).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


class ServerSkipped(Exception):
    """The server cannot run here; ``str(exc)`` is the reason shown to the user
    (e.g. "vsftpd: binary /usr/sbin/vsftpd not found; apt-get install vsftpd")."""


class ServerFailed(Exception):
    """The server was expected to run but failed to start or answer (message says why)."""


@dataclass(frozen=True)
class Target:
    """Where the load generator connects.

    Attributes:
        host: IP address (loopback in tests), e.g. ``"127.0.0.1"``.
        port: FTP control port.
        user / password: login credentials.
        root: server-side home directory of ``user`` as a local path when the backend
            knows it (local backend), else None. Fixtures are placed there.
        http_port: HTTP port for servers that also speak HTTP (tpd), else None.
        netns: a network namespace file (``/proc/<pid>/ns/net``) the load generator
            must join to reach ``host`` (docker backend, network ``netns``: the
            server's own namespace, reached over its loopback), else None: connect
            from where the load generator runs. A driver that cannot honour it must
            refuse the target (runner.backends.netns.call_in_netns does the joining).
    """

    host: str
    port: int
    user: str
    password: str
    root: Path | None = None
    http_port: int | None = None
    netns: str | None = None


@dataclass(frozen=True)
class ServerRequest:
    """One server build to run, as the campaign spec names it.

    Attributes:
        name: server kind: ``pyftpdlib``, ``twisted``, ``vsftpd``, ``proftpd``,
            ``pureftpd``, ``tpd`` or ``external``.
        version: version string for servers installed per version (pyftpdlib,
            twisted), None for "what is installed" / not applicable.
        variant: variant options, e.g. ``{"use_sendfile": False}``.
        external: for ``name == "external"``: host, port, user, password, pid.
        max_clients: connection limit to configure (the seed's 2000).
    """

    name: str
    version: str | None = None
    variant: dict[str, Any] = field(default_factory=dict)
    external: dict[str, Any] = field(default_factory=dict)
    max_clients: int = 2000

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


class Backend(Protocol):
    """Starts servers. Implementations: runner.backends.local.LocalBackend."""

    name: str

    def check(self, req: ServerRequest) -> None:
        """Raise ServerSkipped with the reason when ``req`` cannot run here; else return."""

    def start(self, req: ServerRequest, *, cpu: list[int] | None = None) -> ServerHandle:
        """Start the server (pinned to ``cpu`` cores if given), wait until it answers FTP
        (220 greeting), and return its handle. Raises ServerSkipped or ServerFailed."""
