"""The server catalogue as plain data: one :class:`ServerInfo` per server under test (its
protocols, FTPS and HTTPS modes, versions, Debian packages, upload interface, worker
processes), and the servers of seed 002 that cannot run here and why. Adding a server is
one record here plus its local recipe and its image (docs/adding-a-server.md).

The interface every HTTP server under test implements, with ``HOME`` the
server's home (``Target.root`` for the local backend, ``/srv/ftp`` in a container):

* ``PUT /uploads/<name>`` with a body: the body is written to the new file
  ``HOME/uploads/<name>``; reply 201 (tpd: 204 when it replaced a file).
* ``POST /uploads/`` with a body: written to a new file under ``HOME/uploads/`` with a
  name the server picks (unique); reply 201. Not every server does it
  (:data:`HTTP_UPLOAD_METHODS`, :data:`HTTP_NOTES`).
* A name with ``/`` or a ``..`` segment: 400 (tpd is a general file server: a nested
  name is a path, 404 when its folder is missing; ``..`` is 400). A body larger than the
  server's ``max_body``: 413. Keep-alive on (HTTP/1.1).
* ``GET /<path>``: the file ``HOME/<path>``, static (sendfile where the server does it).

Nothing here imports from ``runner``: the spec, the backends and the CLI read it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

FTP = "ftp"
HTTP = "http"

#: The spec's server names, in the order the CLI and the launch form list them: the keys of
#: :data:`SERVERS` (a Literal, so the spec's JSON schema and mypy know them).
ServerName = Literal["pyftpdlib", "twisted", "vsftpd", "proftpd", "pureftpd", "tpd", "go-http", "nginx", "node-http",
                     "uvicorn", "netty", "external"]

#: Servers that are Python programs: their profile comes from py-spy, which names Python
#: frames (runner.metrics.profile).
PYTHON_SERVERS = frozenset({"pyftpdlib", "twisted", "uvicorn"})

#: Servers whose hot code is compiled at run time, and how perf learns the names of that
#: code (a perf map, ``/tmp/perf-PID.map``, in the server's mount namespace):
#: ``node``: Node started with ``--perf-basic-prof`` (it writes the map as it compiles; a
#: profiled cell gets a server started so); ``jvm``: ``jcmd PID Compiler.perfmap`` (JDK 17)
#: after the phase writes the map of the code cache then (runner.metrics.profile).
JIT_SERVERS: dict[str, str] = {"node-http": "node", "netty": "jvm"}


@dataclass(frozen=True)
class ServerInfo:
    """One server under test, as the lab knows it.

    Attributes:
        name: the spec's server name (``pyftpdlib``, ``tpd``, ``go-http``, ...).
        protocols: ``ftp`` and/or ``http``.
        one_version: one version per install or image (Debian's package, tpd's source tree):
            a spec's ``version:`` could never be honoured and is refused.
        ftps_modes: FTPS (RFC 4217) as xferlab configures it: ``explicit`` (AUTH TLS on the FTP
            port, then PBSZ 0 / PROT P) and/or ``implicit`` (TLS from the first byte, own port).
        ftps_note: why an FTPS mode is missing (the skipped cell's reason).
        https: HTTPS under the local backend (the ``https`` mode of the TLS axis).
        https_docker: HTTPS in its container too (its entrypoint reads ``TLS_MODE=https``).
        upload_methods: HTTP methods it stores an upload with (``PUT``, ``POST``).
        upload_note: why an upload method is missing (the skipped cell's reason).
        workers: takes the ``workers`` variant (worker processes or threads).
        debian: Debian packages the local backend extracts it from (the first holds ``binary``).
        binary: its executable in those packages.
        helpers: other executables the recipe needs from the same packages.
    """

    name: str
    protocols: frozenset[str]
    one_version: bool = False
    ftps_modes: tuple[str, ...] = ()
    ftps_note: str | None = None
    https: bool = False
    https_docker: bool = False
    upload_methods: tuple[str, ...] = ()
    upload_note: str | None = None
    workers: bool = False
    debian: tuple[str, ...] = ()
    binary: str | None = None
    helpers: tuple[str, ...] = ()


_FTP, _HTTP, _BOTH = frozenset({FTP}), frozenset({HTTP}), frozenset({FTP, HTTP})

#: Every server under test, one record each, keyed by :data:`ServerName` in its order
#: (``external``: a server started elsewhere, reached over FTP).
SERVERS: dict[str, ServerInfo] = {s.name: s for s in (
    ServerInfo("pyftpdlib", _FTP, ftps_modes=("explicit",),
               ftps_note="pyftpdlib's TLS_FTPHandler does explicit FTPS (AUTH TLS) only, no implicit listener"),
    ServerInfo("twisted", _FTP,
               ftps_note="Twisted's FTP server (twisted.protocols.ftp) has no FTPS: it answers AUTH TLS with 500"),
    ServerInfo("vsftpd", _FTP, one_version=True, ftps_modes=("explicit", "implicit"), debian=("vsftpd",),
               binary="vsftpd"),
    # proftpd-mod-crypto: mod_tls (FTPS), a DSO module loaded only with the ``tls`` variant
    ServerInfo("proftpd", _FTP, one_version=True, ftps_modes=("explicit", "implicit"),
               debian=("proftpd-core", "proftpd-mod-crypto"), binary="proftpd"),
    ServerInfo("pureftpd", _FTP, one_version=True, ftps_modes=("explicit",),
               ftps_note="pure-ftpd does implicit FTPS only when built with --with-implicittls (then it has no "
                         "plain listener); Debian's build has explicit FTPS (--tls) only",
               debian=("pure-ftpd",), binary="pure-ftpd", helpers=("pure-pw",)),
    ServerInfo("tpd", _BOTH, one_version=True, ftps_modes=("explicit", "implicit"), https=True, https_docker=True,
               upload_methods=("PUT", "POST")),
    ServerInfo("go-http", _HTTP, https=True, https_docker=True, upload_methods=("PUT", "POST"), workers=True),
    ServerInfo("nginx", _HTTP, https=True, https_docker=True, upload_methods=("PUT",), workers=True,
               upload_note="nginx stores uploads only through its DAV module, which takes PUT (a POST to a "
                           "static location is 405): the POST cell is skipped"),
    ServerInfo("node-http", _HTTP, https=True, https_docker=True, upload_methods=("PUT", "POST"), workers=True),
    ServerInfo("uvicorn", _HTTP, https=True, https_docker=True, upload_methods=("PUT", "POST"),
               workers=True),
    ServerInfo("netty", _HTTP, https=True, https_docker=True, upload_methods=("PUT", "POST"), workers=True),
    ServerInfo("external", _FTP),
)}

SERVER_NAMES: tuple[str, ...] = get_args(ServerName)
#: Protocols of each server.
SERVER_PROTOCOLS: dict[str, frozenset[str]] = {n: s.protocols for n, s in SERVERS.items()}
#: Servers that speak FTP / HTTP (``external`` aside).
FTP_SERVERS = frozenset(n for n, s in SERVERS.items() if FTP in s.protocols and n != "external")
HTTP_SERVERS = frozenset(n for n, s in SERVERS.items() if HTTP in s.protocols)
#: Servers with one version per install or image (:attr:`ServerInfo.one_version`).
ONE_VERSION_SERVERS: tuple[str, ...] = tuple(n for n, s in SERVERS.items() if s.one_version)
#: FTPS modes of each server that does FTPS.
FTPS_MODES: dict[str, tuple[str, ...]] = {n: s.ftps_modes for n, s in SERVERS.items() if s.ftps_modes}
#: HTTP servers configured for HTTPS, under the local backend and in their containers.
HTTPS_SERVERS = frozenset(n for n, s in SERVERS.items() if s.https)
DOCKER_HTTPS_SERVERS = frozenset(n for n, s in SERVERS.items() if s.https_docker)
#: HTTP methods each HTTP server stores an upload with.
HTTP_UPLOAD_METHODS: dict[str, tuple[str, ...]] = {n: s.upload_methods for n, s in SERVERS.items()
                                                   if s.upload_methods}
#: Servers that take the ``workers`` variant.
WORKER_SERVERS = frozenset(n for n, s in SERVERS.items() if s.workers)

#: The upload folder under the home, created by every HTTP server's launch.
UPLOADS_DIR = "uploads"

#: Default largest upload body, bytes (the ``max_body`` variant key overrides it): 1 GiB.
DEFAULT_MAX_BODY = 1 << 30

#: Seed 002's servers that cannot run here, with the reason ``xferlab servers`` prints.
UNAVAILABLE_SERVERS: dict[str, str] = {
    "grizzly": "Grizzly (Java, Eclipse GlassFish's NIO framework) is not packaged in Debian 12 and "
               "needs Maven Central; no registry is reachable here",
    "mordor": "Mordor (C++ fibers, Mozy) is not packaged in Debian and unmaintained since 2013; "
              "its build needs sources from GitHub, not reachable here",
    "vibe.d": "vibe.d (D) is not packaged in Debian 12 and installs through the dub registry; "
              "no registry is reachable here",
}


def tls_skip_reason(server: str, mode: str) -> str | None:
    """Why ``server`` cannot serve TLS ``mode`` (FTPS ``explicit``/``implicit``, or
    ``https``), or None when it can (or when ``mode`` is ``none``), e.g.
    ``tls_skip_reason("twisted", "explicit")`` -> the note on Twisted."""
    if mode in ("none", "", None) or mode in FTPS_MODES.get(server, ()):
        return None
    info = SERVERS.get(server)
    if mode == "https":
        if server in HTTPS_SERVERS:
            return None
        return f"{server}: no HTTPS: " + (f"{server} has no HTTPS in xferlab" if info and HTTP in info.protocols
                                           else f"{server} does not speak HTTP")
    why = (info.ftps_note if info and info.ftps_note else f"{server} has no FTPS support in xferlab"
           if info and FTP in info.protocols else f"{server} does not speak FTP")
    return f"{server}: no {mode} FTPS: {why}"


def speaks(server: str, protocol: str) -> bool:
    """True when ``server`` (a ServerRequest name) speaks ``protocol`` (``ftp`` or
    ``http``); False for unknown servers."""
    return protocol in SERVER_PROTOCOLS.get(server, frozenset())


def upload_skip_reason(server: str, method: str) -> str | None:
    """Why ``server`` cannot store an HTTP upload sent with ``method`` (``PUT``/``POST``),
    or None when it can, e.g. ``upload_skip_reason("nginx", "POST")`` -> the DAV note."""
    if HTTP not in SERVER_PROTOCOLS.get(server, frozenset()):
        return f"{server} does not speak HTTP"
    if method.upper() in HTTP_UPLOAD_METHODS.get(server, ()):
        return None
    note = SERVERS[server].upload_note
    return note or f"{server} does not take {method.upper()} uploads"
