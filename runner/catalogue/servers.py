"""The server catalogue as plain data: which protocols each server under test speaks,
how it takes HTTP uploads, and the servers of seed 002 that cannot run here and why.

The interface every HTTP server under test implements (issue 14), with ``HOME`` the
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

FTP = "ftp"
HTTP = "http"

#: Protocols each server under test speaks (``external`` is FTP: xferlab logs in to it).
SERVER_PROTOCOLS: dict[str, frozenset[str]] = {
    "pyftpdlib": frozenset({FTP}),
    "twisted": frozenset({FTP}),
    "vsftpd": frozenset({FTP}),
    "proftpd": frozenset({FTP}),
    "pureftpd": frozenset({FTP}),
    "tpd": frozenset({FTP, HTTP}),
    "go-http": frozenset({HTTP}),
    "nginx": frozenset({HTTP}),
    "node-http": frozenset({HTTP}),
    "uvicorn": frozenset({HTTP}),
    "netty": frozenset({HTTP}),
    "external": frozenset({FTP}),
}

#: Servers that speak FTP / HTTP (``external`` aside).
FTP_SERVERS = frozenset(n for n, p in SERVER_PROTOCOLS.items() if FTP in p and n != "external")
HTTP_SERVERS = frozenset(n for n, p in SERVER_PROTOCOLS.items() if HTTP in p)

#: HTTP methods each HTTP server stores an upload with.
HTTP_UPLOAD_METHODS: dict[str, tuple[str, ...]] = {
    "tpd": ("PUT", "POST"),
    "go-http": ("PUT", "POST"),
    "nginx": ("PUT",),
    "node-http": ("PUT", "POST"),
    "uvicorn": ("PUT", "POST"),
    "netty": ("PUT", "POST"),
}

#: Why a server lacks an upload method, for a cell to be skipped with that reason.
HTTP_NOTES: dict[str, str] = {
    "nginx": "nginx stores uploads only through its DAV module, which takes PUT (a POST to a static "
             "location is 405): the POST cell is skipped",
}

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


#: FTPS (RFC 4217) each server does as xferlab configures it: ``explicit`` (AUTH TLS on the
#: FTP port, then PBSZ 0 / PROT P) and ``implicit`` (TLS from the first byte on a port of
#: its own). A server or mode not listed is a skipped cell with :func:`tls_skip_reason`'s reason.
FTPS_MODES: dict[str, tuple[str, ...]] = {
    "pyftpdlib": ("explicit",),
    "vsftpd": ("explicit", "implicit"),
    "proftpd": ("explicit", "implicit"),
    "pureftpd": ("explicit",),
    "tpd": ("explicit", "implicit"),
}

#: Why a server lacks an FTPS mode.
FTPS_NOTES: dict[str, str] = {
    "twisted": "Twisted's FTP server (twisted.protocols.ftp) has no FTPS: it answers AUTH TLS with 500",
    "pyftpdlib": "pyftpdlib's TLS_FTPHandler does explicit FTPS (AUTH TLS) only, no implicit listener",
    "pureftpd": "pure-ftpd does implicit FTPS only when built with --with-implicittls (then it has no plain "
                "listener); Debian's build has explicit FTPS (--tls) only",
}


#: HTTP servers xferlab configures for HTTPS (the ``https`` mode of the TLS axis), with the
#: reason of the others.
HTTPS_SERVERS = frozenset({"tpd", "nginx", "uvicorn", "go-http", "node-http", "netty"})
#: The HTTPS_SERVERS whose container serves HTTPS too (its entrypoint reads ``TLS_MODE=https``,
#: ``TLS_CERT``, ``TLS_KEY``: docs/containers.md); the others are skipped under the docker
#: backend with the reason (runner.backends.docker.backend._tls_problem).
DOCKER_HTTPS_SERVERS = frozenset({"tpd", "nginx", "go-http", "node-http", "uvicorn", "netty"})
#: Why an HTTP server is not in HTTPS_SERVERS; empty: every HTTP server of the catalogue
#: does HTTPS on the local backend (a server that does not speak HTTP gets that reason).
HTTPS_NOTES: dict[str, str] = {}


def tls_skip_reason(server: str, mode: str) -> str | None:
    """Why ``server`` cannot serve TLS ``mode`` (FTPS ``explicit``/``implicit``, or
    ``https``), or None when it can (or when ``mode`` is ``none``), e.g.
    ``tls_skip_reason("twisted", "explicit")`` -> the note on Twisted."""
    if mode in ("none", "", None) or mode in FTPS_MODES.get(server, ()):
        return None
    if mode == "https":
        if server in HTTPS_SERVERS:
            return None
        return f"{server}: no HTTPS: " + HTTPS_NOTES.get(server, f"{server} does not speak HTTP")
    why = FTPS_NOTES.get(server, f"{server} has no FTPS support in xferlab" if FTP in SERVER_PROTOCOLS.get(
        server, frozenset()) else f"{server} does not speak FTP")
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
    return HTTP_NOTES.get(server, f"{server} does not take {method.upper()} uploads")
