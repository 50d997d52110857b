"""What a cell asks a backend to start: a :class:`ServerRequest` (server name, version,
variant options, an external server's address, the campaign's certificates). Made
from a spec's server entry (runner.spec.model.ServerSpec.request); read by the backends."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from runner.spec.source import SOURCE_SERIES_VERSION


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
        source: a git checkout's directory or a git URL to build the server from
            (runner.spec.source, runner.backends.source); None: a released build.
        ref: with ``source``: the commit, branch or tag; None: the checkout as it is.
        perf_map: start the server so that it writes a perf map of its JIT-compiled code
            (Node's ``--perf-basic-prof``; runner.catalogue.servers.JIT_SERVERS), for a
            profiled cell; not part of the label (the figures' series).
    """

    name: str
    version: str | None = None
    variant: dict[str, Any] = field(default_factory=dict)
    external: dict[str, Any] = field(default_factory=dict)
    max_clients: int = 2000
    tls: Any = None
    source: str | None = None
    ref: str | None = None
    perf_map: bool = False

    @property
    def series_version(self) -> str:
        """The cells' ``server_version``: ``version``, ``"git"`` for a build from source (one
        series across commits; runner.spec.source.SOURCE_SERIES_VERSION), else ``""``."""
        if self.source is not None:
            return SOURCE_SERIES_VERSION
        return self.version or ""

    @property
    def label(self) -> str:
        """Human label, e.g. ``"pyftpdlib 2.2.0"``, ``"pyftpdlib 2.2.0 [use_sendfile=False]"``,
        ``"pyftpdlib @v2.1"`` (built from source at a ref) or ``"tpd @worktree"`` (a checkout as it is)."""
        s = self.name if not self.version else f"{self.name} {self.version}"
        if self.source is not None:
            ref = self.ref[:12] if self.ref and re.fullmatch(r"[0-9a-f]{40}", self.ref) else self.ref
            s += f" @{ref}" if ref else " @worktree"
        if self.variant:
            s += " [" + ",".join(f"{k}={v}" for k, v in sorted(self.variant.items())) + "]"
        return s
