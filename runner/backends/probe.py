"""Readiness probes: FTP greeting (220) and a USER/PASS login (230), or any HTTP reply
for an HTTP-only server. Each attempt is one bounded exchange (runner.load.bounded:
one overall deadline, the time left as every read's timeout, replies capped in lines and
bytes), so a server that drips or floods reply lines cannot stretch a wait past its
``timeout``."""
from __future__ import annotations

import ftplib
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from runner.load.bounded import BoundedFTP, BoundedFTP_TLS, Deadline, read_http_head

if TYPE_CHECKING:
    from runner.load.target import TargetTls


class ProbeError(Exception):
    """The server did not answer the 220 greeting and accept the login in time;
    ``str(exc)`` says what the last attempt saw."""


class NotReadyYet(ValueError):
    """An HTTP server answered the readiness probe with 503 Service Unavailable."""


class _ImplicitFTPS(BoundedFTP_TLS):
    """The bounded FTP_TLS with the TLS handshake right after connect (implicit FTPS)."""

    _server_name: str | None = None

    def connect(self, host: str = "", port: int = 0, timeout: float = -999, source_address=None) -> str:
        self.host, self.port = host, port
        d = self._deadline(host, port)
        with d.guard("connect and TLS handshake"):
            self.sock = socket.create_connection((host, port), d.left("connect"))
            self.af = self.sock.family
            d.arm(self.sock, "TLS handshake")
            self.sock = self.context.wrap_socket(self.sock, server_hostname=self._server_name)
        self.file = self.sock.makefile("r", encoding=self.encoding)
        self.welcome = self.getresp()
        return self.welcome


class _ExplicitFTPS(BoundedFTP_TLS):
    """AUTH TLS verified against the certificate's name, not the address."""

    _server_name: str | None = None

    def _tls_name(self) -> str | None:
        return self._server_name


def _client(tls: TargetTls | None, deadline_s: float) -> ftplib.FTP:
    if tls is None or tls.mode == "https":  # HTTPS leaves the FTP listener plain (tpd)
        return BoundedFTP(deadline_s)
    ctx = ssl.create_default_context(cafile=tls.ca_file)
    ftp: _ImplicitFTPS | _ExplicitFTPS = (_ImplicitFTPS if tls.mode == "implicit" else _ExplicitFTPS)(
        deadline_s, context=ctx)
    ftp._server_name = tls.server_name
    return ftp


def probe_once(host: str, port: int, user: str, password: str, timeout: float = 3.0,
               tls: TargetTls | None = None) -> str:
    """Connect, read the greeting, log in, QUIT; with ``tls``, over FTPS (explicit:
    ``AUTH TLS`` before the login; implicit: TLS from connect), the certificate verified
    against ``tls.ca_file`` and ``tls.server_name``. ``timeout`` (s) bounds the whole
    exchange, connect to QUIT; a reply is capped at runner.load.bounded's
    MAX_REPLY_LINES lines and MAX_REPLY_BYTES bytes. Returns the greeting line (e.g.
    ``"220 xferlab pyftpdlib ready"``). Raises OSError (ssl.SSLError included;
    bounded.ExchangeTimeout past the deadline) or ftplib.Error (bounded.ReplyTooLong
    past a cap) on failure."""
    ftp = _client(tls, timeout)
    try:
        welcome = ftp.connect(host, port)
        if not welcome.startswith("220"):
            raise ftplib.error_reply(welcome)
        resp = ftp.login(user, password)
        if not resp.startswith("230"):
            raise ftplib.error_reply(resp)
        try:
            ftp.quit()
        except (OSError, ftplib.Error):
            pass
        return welcome
    finally:
        ftp.close()


def wait_ready(host: str, port: int, user: str, password: str, *, timeout: float = 20.0,
               alive: Callable[[], bool] | None = None, interval: float = 0.1,
               tls: TargetTls | None = None) -> tuple[str, float]:
    """Poll :func:`probe_once` until it succeeds, at most ``timeout`` seconds.

    Args:
        alive: called between attempts; when it returns False (the server process
            died) waiting stops at once.
        interval: pause between attempts, seconds (grows to 0.5 s).
        tls: probe over FTPS (:func:`probe_once`); a certificate that fails verification
            ends the wait at once (ProbeError), as a refused login does.

    Returns:
        (greeting line, seconds waited).

    Raises:
        ProbeError: deadline reached, or ``alive()`` returned False; the message
            carries the last error (e.g. "connection refused", "530 Login incorrect").
    """
    refusals = 0

    def attempt(left: float) -> str:
        return probe_once(host, port, user, password, timeout=left, tls=tls)

    def failure(e: Exception) -> str:
        nonlocal refusals
        if isinstance(e, ftplib.error_perm):  # 5xx: e.g. 530 login refused; retried 3 times
            refusals += 1
            if refusals >= 3:
                raise ProbeError(f"{host}:{port} answers but refuses the login: {e}") from e
            return f"login refused: {e}"
        if isinstance(e, (ftplib.Error, EOFError)):
            return f"bad reply: {e}"
        if isinstance(e, ssl.SSLCertVerificationError):
            raise ProbeError(f"{host}:{port}: TLS certificate verify failed: {e.verify_message or e}") from e
        if isinstance(e, ConnectionRefusedError):
            return "connection refused"
        if isinstance(e, TimeoutError):
            return f"timed out ({e})" if str(e) else "timed out"
        return f"{type(e).__name__}: {e}"

    return _poll(attempt, (ftplib.Error, EOFError, OSError), failure, f"no FTP login on {host}:{port}",
                 timeout=timeout, alive=alive, interval=interval)


def _poll(attempt: Callable[[float], str], errors: tuple[type[Exception], ...], failure: Callable[[Exception], str],
          nothing: str, *, timeout: float, alive: Callable[[], bool] | None, interval: float) -> tuple[str, float]:
    """The readiness wait of :func:`wait_ready` and :func:`wait_http_ready`: call
    ``attempt(seconds left, between 0.05 and 3)`` until it returns, at most ``timeout`` s
    and 100,000 times, pausing ``interval`` s between attempts (growing by half each time,
    up to 0.5 s). An exception of ``errors`` is a failed attempt, described by
    ``failure(exc)`` (which may raise ProbeError to end the wait at once).

    Returns:
        (what ``attempt`` returned, seconds waited).

    Raises:
        ProbeError: ``alive()`` returned False, or the deadline was reached
            (``"<nothing> within <timeout> s (last probe: ...)"``).
    """
    t0 = time.monotonic()
    deadline = t0 + timeout
    last = "no attempt made"
    for _ in range(100_000):
        if alive is not None and not alive():
            raise ProbeError(f"server process exited during startup (last probe: {last})")
        try:
            return attempt(max(0.05, min(3.0, deadline - time.monotonic()))), time.monotonic() - t0
        except errors as e:
            last = failure(e)
        if time.monotonic() >= deadline:
            break
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(0.5, interval * 1.5)
    raise ProbeError(f"{nothing} within {timeout:.0f} s (last probe: {last})")


def http_probe_once(host: str, port: int, timeout: float = 3.0, tls: TargetTls | None = None) -> str:
    """Send ``HEAD / HTTP/1.1`` and return the status line of any HTTP reply (e.g.
    ``"HTTP/1.1 200 OK"``, ``"HTTP/1.1 403 Forbidden"``: the server is up whatever it
    answers); with ``tls`` (mode ``https``) over TLS, verified against ``tls.ca_file``
    and ``tls.server_name``. ``timeout`` (s) bounds the whole exchange (connect,
    handshake, request, status line); the status line is capped at
    runner.load.bounded.MAX_HTTP_HEAD bytes. Raises OSError (ssl.SSLError included;
    bounded.ExchangeTimeout past the deadline) on a refused, timed-out or unverified
    connection, ValueError when the reply is not HTTP or its first line is too long."""
    d = Deadline(timeout, f"HTTP server {host}:{port}")
    with d.guard("connect"):
        raw = socket.create_connection((host, port), timeout=d.left("connect"))
    if tls is not None and tls.mode == "https":
        try:
            d.arm(raw, "TLS handshake")
            with d.guard("TLS handshake"):
                raw = ssl.create_default_context(cafile=tls.ca_file).wrap_socket(raw, server_hostname=tls.server_name)
        except BaseException:
            raw.close()
            raise
    with raw as s, d.guard("sending the request"):
        d.arm(s, "sending the request")
        s.sendall(f"HEAD / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = read_http_head(s, d)
    line = data.split(b"\r\n", 1)[0].decode("latin-1").strip()
    if not line.startswith("HTTP/"):
        raise ValueError(f"not an HTTP reply: {line[:80]!r}")
    return line


def wait_http_ready(host: str, port: int, *, timeout: float = 20.0, alive: Callable[[], bool] | None = None,
                    interval: float = 0.1, tls: TargetTls | None = None) -> tuple[str, float]:
    """Poll :func:`http_probe_once` until the server answers with any status but
    ``503 Service Unavailable`` (RFC 9110 15.6.4: "currently unable to handle the
    request"; node-http's cluster answers it until every worker listens), at most
    ``timeout`` s (``alive`` and ``interval`` as :func:`wait_ready`).

    Returns:
        (status line, seconds waited).

    Raises:
        ProbeError: deadline reached or the server process died; the message has the
            last error.
    """
    def failure(e: Exception) -> str:
        return "connection refused" if isinstance(e, ConnectionRefusedError) else f"{type(e).__name__}: {e}"

    def attempt(left: float) -> str:
        line = http_probe_once(host, port, left, tls)
        if line.split(None, 2)[1:2] == ["503"]:
            raise NotReadyYet(f"{line} (the server says it is not ready yet)")
        return line

    return _poll(attempt, (OSError, ValueError), failure,
                 f"no HTTP reply on {host}:{port}", timeout=timeout, alive=alive, interval=interval)
