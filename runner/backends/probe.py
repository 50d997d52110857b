"""Readiness probes: FTP greeting (220) and a USER/PASS login (230), or any HTTP reply
for an HTTP-only server; bounded in time."""
from __future__ import annotations

import ftplib
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import TargetTls


class ProbeError(Exception):
    """The server did not answer the 220 greeting and accept the login in time;
    ``str(exc)`` says what the last attempt saw."""


class _ImplicitFTPS(ftplib.FTP_TLS):
    """ftplib's FTP_TLS with the TLS handshake right after connect (implicit FTPS)."""

    def connect(self, host: str = "", port: int = 0, timeout: float = -999, source_address=None) -> str:
        self.host, self.port, self.timeout = host, port, timeout
        self.sock = socket.create_connection((host, port), timeout)
        self.af = self.sock.family
        self.sock = self.context.wrap_socket(self.sock, server_hostname=self._server_name)
        self.file = self.sock.makefile("r", encoding=self.encoding)
        self.welcome = self.getresp()
        return self.welcome

    _server_name: str | None = None


def _client(tls: TargetTls | None) -> ftplib.FTP:
    if tls is None or tls.mode == "https":  # HTTPS leaves the FTP listener plain (tpd)
        return ftplib.FTP()
    ctx = ssl.create_default_context(cafile=tls.ca_file)
    if tls.mode == "implicit":
        ftp: ftplib.FTP_TLS = _ImplicitFTPS(context=ctx)
        ftp._server_name = tls.server_name  # type: ignore[attr-defined]
        return ftp

    name = tls.server_name

    class _Explicit(ftplib.FTP_TLS):  # AUTH TLS verified against the certificate's name, not the address
        def auth(self) -> str:
            resp = self.voidcmd("AUTH TLS")
            assert self.sock is not None  # connected: AUTH TLS was answered on it
            self.sock = self.context.wrap_socket(self.sock, server_hostname=name)
            self.file = self.sock.makefile(mode="r", encoding=self.encoding)
            return resp

    return _Explicit(context=ctx)


def probe_once(host: str, port: int, user: str, password: str, timeout: float = 3.0,
               tls: TargetTls | None = None) -> str:
    """Connect, read the greeting, log in, QUIT; with ``tls``, over FTPS (explicit:
    ``AUTH TLS`` before the login; implicit: TLS from connect), the certificate verified
    against ``tls.ca_file`` and ``tls.server_name``. Returns the greeting line (e.g.
    ``"220 xferlab pyftpdlib ready"``). Raises OSError (ssl.SSLError included) or
    ftplib.Error on failure."""
    ftp = _client(tls)
    try:
        welcome = ftp.connect(host, port, timeout=timeout)
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
    t0 = time.monotonic()
    deadline = t0 + timeout
    last = "no attempt made"
    attempts = 0
    refusals = 0
    while attempts < 100_000:
        attempts += 1
        if alive is not None and not alive():
            raise ProbeError(f"server process exited during startup (last probe: {last})")
        try:
            greeting = probe_once(host, port, user, password,
                                  timeout=max(0.5, min(3.0, deadline - time.monotonic())), tls=tls)
            return greeting, time.monotonic() - t0
        except ftplib.error_perm as e:  # 5xx: e.g. 530 login refused; retried 3 times
            last = f"login refused: {e}"
            refusals += 1
            if refusals >= 3:
                raise ProbeError(f"{host}:{port} answers but refuses the login: {e}") from e
        except (ftplib.Error, EOFError) as e:
            last = f"bad reply: {e}"
        except ssl.SSLCertVerificationError as e:
            raise ProbeError(f"{host}:{port}: TLS certificate verify failed: {e.verify_message or e}") from e
        except ConnectionRefusedError:
            last = "connection refused"
        except TimeoutError:
            last = "timed out"
        except OSError as e:
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() >= deadline:
            break
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(0.5, interval * 1.5)
    raise ProbeError(f"no FTP login on {host}:{port} within {timeout:.0f} s (last probe: {last})")


def http_probe_once(host: str, port: int, timeout: float = 3.0, tls: TargetTls | None = None) -> str:
    """Send ``HEAD / HTTP/1.1`` and return the status line of any HTTP reply (e.g.
    ``"HTTP/1.1 200 OK"``, ``"HTTP/1.1 403 Forbidden"``: the server is up whatever it
    answers); with ``tls`` (mode ``https``) over TLS, verified against ``tls.ca_file``
    and ``tls.server_name``. Raises OSError (ssl.SSLError included) on a refused,
    timed-out or unverified connection, ValueError when the reply is not HTTP."""
    raw = socket.create_connection((host, port), timeout=timeout)
    if tls is not None and tls.mode == "https":
        try:
            raw = ssl.create_default_context(cafile=tls.ca_file).wrap_socket(raw, server_hostname=tls.server_name)
        except BaseException:
            raw.close()
            raise
    with raw as s:
        s.sendall(f"HEAD / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while b"\n" not in data and len(data) < 4096:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    line = data.split(b"\r\n", 1)[0].decode("latin-1").strip()
    if not line.startswith("HTTP/"):
        raise ValueError(f"not an HTTP reply: {line[:80]!r}")
    return line


def wait_http_ready(host: str, port: int, *, timeout: float = 20.0, alive: Callable[[], bool] | None = None,
                    interval: float = 0.1, tls: TargetTls | None = None) -> tuple[str, float]:
    """Poll :func:`http_probe_once` until the server answers, at most ``timeout`` s
    (``alive`` and ``interval`` as :func:`wait_ready`).

    Returns:
        (status line, seconds waited).

    Raises:
        ProbeError: deadline reached or the server process died; the message has the
            last error.
    """
    t0 = time.monotonic()
    deadline = t0 + timeout
    last = "no attempt made"
    for _ in range(100_000):
        if alive is not None and not alive():
            raise ProbeError(f"server process exited during startup (last probe: {last})")
        try:
            return http_probe_once(host, port, max(0.5, min(3.0, deadline - time.monotonic())), tls), \
                time.monotonic() - t0
        except ConnectionRefusedError:
            last = "connection refused"
        except (OSError, ValueError) as e:
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() >= deadline:
            break
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(0.5, interval * 1.5)
    raise ProbeError(f"no HTTP reply on {host}:{port} within {timeout:.0f} s (last probe: {last})")
