"""What a cell asks a backend to start: a :class:`ServerRequest` (server name, version,
variant options, an external server's address, the campaign's certificates). Made
from a spec's server entry (runner.spec.model.ServerSpec.request); read by the backends."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ServerRequest:
    """One server build to run, as the campaign spec names it.

    Attributes:
        name: server kind: ``pyftpdlib``, ``twisted``, ``vsftpd``, ``proftpd``,
            ``pureftpd``, ``tpd``, ``go-http``, ``nginx``, ``node-http``, ``uvicorn``, ``netty`` or
            ``external`` (runner.catalogue.servers: the protocols of each).
        version: version string for servers installed per version (pyftpdlib,
            twisted), None for "what is installed" / not applicable.
        variant: variant options, e.g. ``{"use_sendfile": False}``.
        external: for ``name == "external"``: host, port, user, password, pid.
        max_clients: connection limit to configure (the seed's 2000).
        tls: the campaign's certificate files (runner.tls.certs.TlsFiles) for a
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
