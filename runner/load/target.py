"""Where the load goes: the :class:`Target` a backend hands to a driver (host, port, login,
the server's root, the network namespace to join, TLS settings). Part of the load
contract, below the backends that make targets and the drivers that use them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TargetTls:
    """How the load generator speaks TLS to a target (FTPS, RFC 4217).

    Attributes:
        mode: ``"explicit"`` (greeting, ``AUTH TLS``, handshake, ``PBSZ 0``, ``PROT P``)
            or ``"implicit"`` (TLS from the first byte on ``Target.port``).
        ca_file: PEM file of the CA the server certificate must chain to.
        server_name: the DNS name verified in the certificate (SNI too), e.g.
            ``"xferlab-server"`` (runner.tls.certs.SERVER_NAME).
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
            refuse the target (runner.net.netns.call_in_netns does the joining).
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
