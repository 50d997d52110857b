"""Bounded exchanges with a server under test, for the runner's side channels (readiness
and liveness probes, the SIZE/DELE check of uploads, the HTTP readiness probe).

A server under test may be hostile (an ``external`` server is whatever the spec names),
so each exchange with it has:

* ONE overall deadline (:class:`Deadline`, monotonic clock) from the connect to the last
  reply: before every socket operation (connect, TLS handshake, send, each read) the
  socket's timeout is set to the time left, so a server that drips one line a second,
  each within a per-read timeout, cannot stretch the exchange past its deadline;
* a cap on each reply: at most :data:`MAX_REPLY_LINES` lines and :data:`MAX_REPLY_BYTES`
  bytes per FTP reply, :data:`MAX_HTTP_HEAD` bytes of an HTTP status line, so a server
  that floods continuation lines cannot grow the worker's memory.

Past the deadline :class:`ExchangeTimeout` (a TimeoutError, hence an OSError) is raised;
past a cap :class:`ReplyTooLong` (an ftplib.Error); both name the server and the bound.
:class:`BoundedFTP` and :class:`BoundedFTP_TLS` are ftplib's clients with these bounds
(``getline``/``getmultiline``/``putline``/``connect`` overridden); the load generator's
own asyncio client has its bounds in runner.load.ftp.replies and runner.load.ftp.session.
"""
from __future__ import annotations

import ftplib
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Most lines in one FTP reply read on a side channel (a greeting banner has a few).
MAX_REPLY_LINES = 100
#: Most bytes (characters) in one FTP reply read on a side channel.
MAX_REPLY_BYTES = 64 * 1024
#: Most bytes read of an HTTP reply's head (status line) by the readiness probe.
MAX_HTTP_HEAD = 8 * 1024


class ExchangeTimeout(TimeoutError):
    """An exchange with a server did not complete by its deadline; the message names
    the server, what was being waited for and the deadline (s)."""


class ReplyTooLong(ftplib.Error):
    """A server's reply exceeded :data:`MAX_REPLY_LINES` lines or :data:`MAX_REPLY_BYTES`
    bytes; the message names the server and the cap."""


class Deadline:
    """One overall time bound of an exchange with ``server`` (its name in messages, e.g.
    ``"FTP server 127.0.0.1:2121"``), ``seconds`` from creation. Raises ValueError for a bound that is not positive."""

    def __init__(self, seconds: float, server: str) -> None:
        if not seconds > 0:
            raise ValueError(f"deadline for {server}: must be > 0 seconds, got {seconds!r}")
        self.seconds = float(seconds)
        self.server = server
        self.end = time.monotonic() + self.seconds

    def left(self, what: str) -> float:
        """Seconds left (> 0); raises ExchangeTimeout naming ``what`` when none are."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise self.expired(what)
        return left

    def expired(self, what: str) -> ExchangeTimeout:
        """The ExchangeTimeout naming the server, ``what`` and the deadline."""
        return ExchangeTimeout(f"{self.server}: {what} not complete within the {self.seconds:g} s "
                               "deadline of the exchange")

    def arm(self, sock: socket.socket, what: str) -> None:
        """Set ``sock``'s timeout to the time left (raises ExchangeTimeout when none)."""
        sock.settimeout(self.left(what))

    @contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Turn a socket timeout inside the block (the time left ran out) into the
        ExchangeTimeout naming ``what``."""
        try:
            yield
        except ExchangeTimeout:
            raise
        except TimeoutError:
            raise self.expired(what) from None


class _Bounded:
    """Mixin over ftplib.FTP / FTP_TLS: one :class:`Deadline` for the session, started by
    the first connect, and the reply caps. ``deadline_s`` is the session's bound (s)."""

    sock: Any
    file: Any
    maxline: int
    host: str
    port: int

    def __init__(self, deadline_s: float, **kwargs: Any) -> None:
        self.deadline_s = float(deadline_s)
        self.deadline: Deadline | None = None
        self._reply_lines = 0
        self._reply_bytes = 0
        super().__init__(**kwargs)

    def _deadline(self, host: str, port: int) -> Deadline:
        if self.deadline is None:
            self.deadline = Deadline(self.deadline_s, f"FTP server {host}:{port}")
        return self.deadline

    def connect(self, host: str = "", port: int = 0, timeout: float = -999,
                source_address: Any = None) -> str:
        """ftplib's connect, the connect and greeting bounded by the deadline (``timeout``
        is ignored: the time left is used)."""
        d = self._deadline(host or self.host, port or self.port)
        with d.guard("connect and greeting"):
            return super().connect(host, port, d.left("connect"), source_address)  # type: ignore[misc]

    def _what(self) -> str:
        return f"FTP server {self.host}:{self.port}"

    def putline(self, line: str) -> None:
        """Send one command line within the deadline."""
        if self.deadline is None or self.sock is None:
            super().putline(line)  # type: ignore[misc]
            return
        self.deadline.arm(self.sock, "sending a command")
        with self.deadline.guard("sending a command"):
            super().putline(line)  # type: ignore[misc]

    def getline(self) -> str:
        """Read one reply line within the deadline and the reply's byte cap."""
        room = MAX_REPLY_BYTES - self._reply_bytes
        if self.deadline is not None and self.sock is not None:
            self.deadline.arm(self.sock, "reading a reply")
            with self.deadline.guard("reading a reply"):
                line = self.file.readline(min(self.maxline, room) + 1)
        else:
            line = self.file.readline(min(self.maxline, room) + 1)
        if len(line) > room:
            raise ReplyTooLong(f"{self._what()}: reply longer than {MAX_REPLY_BYTES} bytes (cap)")
        if len(line) > self.maxline:
            raise ftplib.Error(f"{self._what()}: reply line longer than {self.maxline} bytes")
        if not line:
            raise EOFError(f"{self._what()} closed the connection")
        self._reply_bytes += len(line)
        self._reply_lines += 1
        return line[:-2] if line[-2:] == "\r\n" else line[:-1] if line[-1:] in "\r\n" else line

    def getmultiline(self) -> str:
        """One reply (RFC 959 section 4.2), at most :data:`MAX_REPLY_LINES` lines and
        :data:`MAX_REPLY_BYTES` bytes."""
        self._reply_lines = self._reply_bytes = 0
        first = self.getline()
        if first[3:4] != "-":
            return first
        lines, code = [first], first[:3]
        while True:
            if self._reply_lines >= MAX_REPLY_LINES:
                raise ReplyTooLong(f"{self._what()}: reply longer than {MAX_REPLY_LINES} lines (cap)")
            nxt = self.getline()
            lines.append(nxt)
            if nxt[:3] == code and nxt[3:4] != "-":
                return "\n".join(lines)


class BoundedFTP(_Bounded, ftplib.FTP):
    """ftplib.FTP with one overall deadline and capped replies (module docstring).
    ``BoundedFTP(deadline_s)``; errors as ftplib's plus ExchangeTimeout / ReplyTooLong."""


class BoundedFTP_TLS(_Bounded, ftplib.FTP_TLS):  # noqa: N801 - ftplib's spelling
    """ftplib.FTP_TLS with the bounds of :class:`BoundedFTP`: ``AUTH TLS`` and the
    handshake too are within the deadline. ``BoundedFTP_TLS(deadline_s, context=ctx)``."""

    def auth(self) -> str:
        """``AUTH TLS`` then the handshake, both within the deadline."""
        resp = self.voidcmd("AUTH TLS")
        if self.deadline is not None:
            self.deadline.arm(self.sock, "TLS handshake")
            with self.deadline.guard("TLS handshake"):
                self.sock = self.context.wrap_socket(self.sock, server_hostname=self._tls_name())
        else:
            self.sock = self.context.wrap_socket(self.sock, server_hostname=self._tls_name())
        self.file = self.sock.makefile(mode="r", encoding=self.encoding)
        return resp

    def _tls_name(self) -> str | None:
        return self.host


def read_http_head(sock: socket.socket, deadline: Deadline) -> bytes:
    """Read an HTTP reply from ``sock`` until its first line is complete (``\\n``), at most
    :data:`MAX_HTTP_HEAD` bytes, within ``deadline``. Returns what was read (it may end
    without a newline when the peer closed). Raises ExchangeTimeout, ValueError (head
    longer than the cap) or OSError."""
    data = b""
    for _ in range(MAX_HTTP_HEAD):  # bounded: each pass reads at least one byte or ends
        deadline.arm(sock, "reading the HTTP status line")
        with deadline.guard("reading the HTTP status line"):
            chunk = sock.recv(MAX_HTTP_HEAD + 1 - len(data))
        if not chunk:
            break
        data += chunk
        if b"\n" in data:
            break
        if len(data) > MAX_HTTP_HEAD:
            raise ValueError(f"{deadline.server}: status line longer than {MAX_HTTP_HEAD} bytes (cap)")
    return data
