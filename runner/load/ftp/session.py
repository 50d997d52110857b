"""An asyncio FTP client session, built for measuring servers (RFC 959, RFC 2428).

One :class:`FTPSession` is one control connection. It speaks just what the classic
suite needs: greeting, ``USER``/``PASS``, ``TYPE I``, ``PASV`` (RFC 959 section 4.1.2)
or ``EPSV`` (RFC 2428 section 3) data connections, ``RETR``, ``STOR``, ``SIZE``
(RFC 3659 section 4), ``DELE`` and ``QUIT``.

Design for speed (the client must never be the bottleneck):

* the control connection is a plain :class:`asyncio.Protocol` with an incremental
  reply parser (no StreamReader, one future per reply);
* ``RETR`` reads into one preallocated, shared ``bytearray`` (the payload is
  counted, never kept): by default from a raw non-blocking socket drained with
  ``recv_into`` in a ``loop.add_reader`` callback, with ``SO_RCVLOWAT`` so each
  wake-up finds half a buffer queued; alternatives (``retr_mode``) are
  :class:`asyncio.BufferedProtocol` (``get_buffer`` / ``buffer_updated``) and
  ``loop.sock_recv_into``;
* ``STOR`` sends from a local file with :func:`runner.load.loop.sendfile` (``os.sendfile``,
  zero-copy; no fallback to read/send).

Every await is bounded by a timeout. Every failure is raised as :class:`FTPError`
with a ``kind`` from :data:`ERROR_KINDS`, so callers count errors by kind.
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import TYPE_CHECKING, BinaryIO, Literal

from runner.load.ftp.listing import ListingCommands
from runner.load.ftp.replies import (
    ERROR_KINDS,
    MAX_LINE,
    MAX_PENDING_REPLIES,
    MAX_PRELIMINARY,
    MAX_REPLY_LINES,
    FTPError,
    Reply,
    ReplyParser,
    _with_timeout,
    classify,
    parse_epsv,
    parse_pasv,
    reply_error,
)
from runner.load.ftp.retr import DEFAULT_RETR_MODE, RetrMode, RetrReceivers, scratch_buffer
from runner.load.ftp.tls import TlsTransfers, client_context, tls_facts
from runner.load.loop import sendfile, sendfile_blocking

if TYPE_CHECKING:
    from runner.load.target import TargetTls

#: Re-exported: the load generator, its tests and the selftest import them from here.
__all__ = ["ERROR_KINDS", "MAX_LINE", "MAX_REPLY_LINES", "FTPError", "FTPSession", "Reply", "ReplyParser",
           "RetrMode", "classify", "open_session", "parse_epsv", "parse_pasv", "reply_error", "scratch_buffer"]


class _ControlProtocol(asyncio.Protocol):
    """Control connection: parses replies as they arrive, hands them to one waiter."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = ReplyParser()
        self.replies: list[Reply] = []
        self.waiter: asyncio.Future | None = None
        self.error: BaseException | None = None
        self.closed: asyncio.Future = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:  # noqa: D102
        self.transport = transport

    def data_received(self, data: bytes) -> None:  # noqa: D102
        try:
            self.replies.extend(self.parser.feed(data))
            if len(self.replies) > MAX_PENDING_REPLIES:
                raise FTPError("protocol", f"more than {MAX_PENDING_REPLIES} replies sent unasked")
        except FTPError as e:
            self.error = e
            if self.transport is not None:
                self.transport.abort()
        self._wake()

    def eof_received(self):  # noqa: D102
        if self.error is None:
            self.error = FTPError("reset", "control connection closed by server")
        self._wake()
        return False

    def connection_lost(self, exc) -> None:  # noqa: D102
        if self.error is None:
            self.error = (
                FTPError("reset", f"control connection lost: {exc}") if exc
                else FTPError("reset", "control connection closed by server"))
        self._wake()
        if not self.closed.done():
            self.closed.set_result(None)

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done() and (self.replies or self.error is not None):
            w.set_result(None)


class FTPSession(RetrReceivers, TlsTransfers, ListingCommands):
    """One FTP control connection and the data connections it opens.

    Args:
        host: server IP address or name (loopback in tests).
        port: FTP control port.
        op_timeout: bound on each operation after the greeting (s): one reply, one
            whole transfer (data connect + payload + final reply).
        connect_timeout: bound on the control connect and on the greeting (s); None =
            ``op_timeout``. The load generator passes a long one (WorkloadParams).
        passive: ``"pasv"`` (RFC 959) or ``"epsv"`` (RFC 2428) data connections.
        buffer_size: RETR receive buffer (bytes), shared across sessions.
        retr_mode: how RETR payload is read (runner.load.ftp.retr): ``"splice"`` (default
            where ``os.splice`` exists: a ``loop.add_reader`` callback splicing socket ->
            pipe -> /dev/null, no copy to user space), ``"reader"`` (the same callback
            draining up to 8 ``recv_into`` per wake-up into one shared buffer; the
            default without ``os.splice``), ``"protocol"`` (asyncio BufferedProtocol) or
            ``"recv_into"`` (``await loop.sock_recv_into`` loop). Measured by
            benchmarks/loadgen_selftest.py: "splice" with SO_RCVLOWAT uses about a third
            of the client CPU per GiB of "reader" on loopback (docs/methodology.md,
            "Client cost").
        rcvlowat: SO_RCVLOWAT (socket(7)) on RETR data sockets, so a wake-up finds at
            least this many bytes queued (fewer wake-ups per GiB); None = half of
            ``buffer_size``, 0 = leave the kernel default (1 byte).
        tls: FTPS (runner.load.target.TargetTls): ``explicit`` does ``AUTH TLS`` after
            the greeting and ``PBSZ 0`` / ``PROT P`` after login, ``implicit`` the handshake
            right after connect; every data connection is then TLS (runner.load.ftp.tls).
            ``handshake_s`` holds the control connection's handshake time (s), ``tls_info``
            the negotiated protocol and cipher. None: plain FTP.

    All methods raise :class:`FTPError` (with a kind) on failure. ``close()`` never
    raises. Use ``async with FTPSession(...) as s`` or call ``close()``.
    """

    def __init__(self, host: str, port: int, *, op_timeout: float = 30.0,
                 connect_timeout: float | None = None, passive: Literal["pasv", "epsv"] = "pasv",
                 buffer_size: int = 256 * 1024,
                 retr_mode: RetrMode = DEFAULT_RETR_MODE, rcvlowat: int | None = None,
                 tls: TargetTls | None = None) -> None:
        self.host = host
        self.port = port
        self.op_timeout = op_timeout
        self.connect_timeout = op_timeout if connect_timeout is None else connect_timeout
        self.passive = passive
        self.buffer_size = buffer_size
        self.retr_mode = retr_mode
        self.rcvlowat = buffer_size // 2 if rcvlowat is None else rcvlowat
        self._proto: _ControlProtocol | None = None
        self._family: int = socket.AF_INET
        self._data_socks: set[socket.socket] = set()
        self._data_transports: set[asyncio.Transport] = set()
        if tls is not None and tls.mode == "https":  # HTTPS leaves the FTP listener plain (tpd)
            tls = None
        self.tls_mode = tls.mode if tls is not None else None
        self.tls_context = client_context(tls.ca_file) if tls is not None else None
        self.server_name = tls.server_name if tls is not None else None
        self.handshake_s: float | None = None
        self.tls_info: dict[str, str] = {}
        #: True once ``TYPE I`` was accepted (a kept session is not asked again).
        self.binary = False

    # -- control connection -------------------------------------------------------
    async def connect(self) -> Reply:
        """Open the control connection, bounded by ``connect_timeout``, and read the
        greeting (``220``; up to MAX_PRELIMINARY ``1xx`` skipped), all of it bounded by
        one more ``connect_timeout``. Returns the greeting reply."""
        loop = asyncio.get_running_loop()
        try:
            self._family = _family_of(self.host)
        except ValueError:
            self._family = socket.AF_UNSPEC
        try:
            async with asyncio.timeout(self.connect_timeout):
                transport, proto = await loop.create_connection(_ControlProtocol, self.host, self.port)
        except TimeoutError:
            raise FTPError("timeout", f"connect to {self.host}:{self.port}: no answer within "
                                      f"{self.connect_timeout:g} s") from None
        except OSError as e:
            raise FTPError(classify(e), f"connect to {self.host}:{self.port}: {e}") from e
        self._proto = proto
        if self._family == socket.AF_UNSPEC:
            self._family = transport.get_extra_info("socket").family
        if self.tls_mode == "implicit":
            await self._start_tls()
        end = loop.time() + self.connect_timeout
        r = await self.read_reply("greeting", self.connect_timeout)
        for _ in range(MAX_PRELIMINARY):  # every 1xx within the one bound
            if not 100 <= r.code < 200:
                break
            r = await self.read_reply("greeting", max(0.001, end - loop.time()))
        if r.code != 220:
            raise reply_error(r, "greeting")
        if self.tls_mode == "explicit":
            self.send("AUTH TLS")  # RFC 4217 section 4: 234, then the handshake
            a = await self.read_reply("AUTH TLS", self.connect_timeout)
            if a.code != 234:
                raise FTPError("tls_refused", f"AUTH TLS: server answered {a.code} {a.text[:120]}", a.code)
            await self._start_tls()
        return r

    async def _start_tls(self) -> None:
        p = self._proto
        assert p is not None and p.transport is not None
        p.transport = await self._handshake_control(p.transport, p)
        self.tls_info = tls_facts(p.transport)

    async def read_reply(self, what: str = "reply", timeout: float | None = None) -> Reply:
        """Next complete reply on the control connection, bounded by ``timeout`` (s;
        None = ``op_timeout``)."""
        bound = self.op_timeout if timeout is None else timeout
        p = self._proto
        if p is None:
            raise FTPError("protocol", f"{what}: not connected")
        if not p.replies:
            if p.error is not None:
                raise p.error
            loop = asyncio.get_running_loop()
            w = p.waiter = loop.create_future()
            h = loop.call_later(bound, _expire, w)
            try:
                await w
            finally:
                h.cancel()
                p.waiter = None
            if not p.replies:
                if p.error is not None:
                    raise p.error
                raise FTPError("timeout", f"{what}: no reply within {bound:g} s")
        return p.replies.pop(0)

    def send(self, line: str) -> None:
        """Send one command line (CRLF appended). Raises FTPError(kind="reset") when the
        control connection is closed."""
        p = self._proto
        if p is None or p.transport is None or p.transport.is_closing():
            raise FTPError("reset", f"send {line.split(' ', 1)[0]}: control connection closed")
        p.transport.write(line.encode("utf-8") + b"\r\n")

    async def command(self, line: str, expect: tuple[int, ...]) -> Reply:
        """Send ``line`` and read the reply; raise FTPError unless its code is in
        ``expect``. Returns the reply."""
        self.send(line)
        r = await self.read_reply(line.split(" ", 1)[0])
        if r.code not in expect:
            raise reply_error(r, line.split(" ", 1)[0])
        return r

    async def login(self, user: str, password: str) -> None:
        """``USER``/``PASS`` (RFC 959 section 4.1.1): 230 after USER or 331/332 then 230."""
        r = await self.command(f"USER {user}", (230, 331, 332))
        if r.code != 230:
            await self.command(f"PASS {password}", (230, 202))
        if self.tls_mode is not None:  # RFC 4217 sections 8-9: every data connection in TLS
            await self.command("PBSZ 0", (200,))
            await self.command("PROT P", (200,))

    async def type_binary(self) -> None:
        """``TYPE I`` (image/binary), needed for RETR/STOR byte counts and SIZE."""
        await self.command("TYPE I", (200,))
        self.binary = True

    async def size(self, path: str) -> int:
        """``SIZE path`` (RFC 3659 section 4): file size in bytes (reply 213)."""
        r = await self.command(f"SIZE {path}", (213,))
        try:
            return int(r.text.strip().split()[0])
        except (ValueError, IndexError):
            raise FTPError("protocol", f"SIZE: cannot parse {r.text[:80]!r}") from None

    async def dele(self, path: str) -> None:
        """``DELE path`` (RFC 959): delete a server file (reply 250)."""
        await self.command(f"DELE {path}", (250, 200))

    async def quit(self, *, wait_close: bool = True) -> None:
        """``QUIT``: expect 221, then (``wait_close``) wait, bounded by the session's
        operation timeout, until the server closes the connection; then close our side.
        ``wait_close=False`` is for sessions ended only because their server stops next:
        the server's own exit after its 221 (proftpd: up to 3.3 s for 300 sessions, each
        exiting session waiting its turn for the scoreboard's lock file) is then nobody's
        figure and not waited for."""
        try:
            await self.command("QUIT", (221,))
            assert self._proto is not None  # command() succeeded on it
            if wait_close:
                await _with_timeout(asyncio.shield(self._proto.closed), self.op_timeout, "QUIT close")
        finally:
            self.close()

    def close(self) -> None:
        """Abort the control connection and any open data connection. Never raises."""
        for s in self._data_socks:
            try:
                s.close()
            except OSError:
                pass
        self._data_socks.clear()
        for t in self._data_transports:
            t.abort()
        self._data_transports.clear()
        p = self._proto
        if p is not None and p.transport is not None:
            p.transport.abort()

    async def __aenter__(self) -> FTPSession:
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    # -- data connections ---------------------------------------------------------
    async def _passive_port(self) -> int:
        if self.passive == "epsv":
            r = await self.command("EPSV", (229,))
            return parse_epsv(r.text)
        r = await self.command("PASV", (227,))
        return parse_pasv(r.text)

    def _addr(self, port: int) -> tuple:
        if self._family == socket.AF_INET6:
            return (self.host, port, 0, 0)
        return (self.host, port)

    async def _open_raw(self, port: int) -> socket.socket:
        loop = asyncio.get_running_loop()
        sock = socket.socket(self._family, socket.SOCK_STREAM)
        sock.setblocking(False)
        self._data_socks.add(sock)
        try:
            await loop.sock_connect(sock, self._addr(port))
        except OSError as e:
            self._drop_sock(sock)
            raise FTPError(classify(e), f"data connect to {self.host}:{port}: {e}") from e
        return sock

    def _drop_sock(self, sock: socket.socket) -> None:
        self._data_socks.discard(sock)
        try:
            sock.close()
        except OSError:
            pass

    async def _preliminary(self, what: str) -> None:
        r = await self.read_reply(what)
        if r.code not in (125, 150):
            raise reply_error(r, what)

    async def _final(self, what: str) -> Reply:
        r = await self.read_reply(what)
        if r.code not in (226, 250):
            raise reply_error(r, what)
        return r

    async def retr(self, path: str, expected: int, *, offset: int = 0) -> int:
        """Download ``path`` and count its bytes: PASV/EPSV, (``REST offset``, RFC 3659
        section 5, when ``offset`` > 0: a resumed download), data connect, ``RETR``,
        payload to EOF, final ``226``. The whole transfer is bounded by ``op_timeout``.

        Returns the bytes received, which equal ``expected`` (the bytes from ``offset``
        to the end). Raises FTPError(kind="short_transfer") when fewer bytes arrived than
        ``expected`` though the server confirmed the transfer, ``protocol`` when more
        arrived, a reply kind when REST is refused.
        """
        return await _with_timeout(self._retr(path, expected, offset), self.op_timeout, f"RETR {path}")

    async def _retr(self, path: str, expected: int, offset: int = 0) -> int:
        port = await self._passive_port()
        if offset:
            await self.command(f"REST {offset}", (350,))
        if self.tls_mode is not None:
            n = await self._retr_tls(port, path)
        elif self.retr_mode == "recv_into":
            n = await self._retr_recv_into(port, path)
        elif self.retr_mode == "reader":
            n = await self._retr_reader(port, path)
        elif self.retr_mode == "splice":
            n = await self._retr_splice(port, path)
        else:
            n = await self._retr_protocol(port, path)
        await self._final(f"RETR {path}")
        if n < expected:
            raise FTPError("short_transfer", f"RETR {path}: {n} of {expected} bytes received, "
                                             "server confirmed 226")
        if n > expected:
            raise FTPError("protocol", f"RETR {path}: {n} bytes received, expected {expected}")
        return n

    async def stor(self, path: str, file: BinaryIO, count: int, *, verify_size: bool = True) -> int:
        """Upload ``count`` bytes of ``file`` (from offset 0) as ``path``: PASV/EPSV,
        data connect, ``STOR``, ``os.sendfile`` (zero-copy), close, final ``226``; then,
        when ``verify_size``, ``SIZE path`` must equal ``count``. Transfer bounded by
        ``op_timeout``, SIZE by its own reply bound.

        Returns ``count`` (bytes confirmed). Raises FTPError(kind="short_transfer")
        when fewer bytes could be sent or the server's SIZE differs.
        """
        n = await _with_timeout(self.stor_transfer(path, file, count), self.op_timeout,
                                f"STOR {path}")
        if verify_size:
            await self.verify_size(path, n)
        return n

    async def stor_transfer(self, path: str, file: BinaryIO, count: int, *, alone: bool = False) -> int:
        """The timed part of :meth:`stor` (no timeout of its own, no SIZE check).
        ``alone``: the only transfer of the process at this moment (single-stream STOR):
        sent with blocking sendfile on a worker thread (runner.load.loop.sendfile_blocking).
        Returns the bytes sent and confirmed by ``226``."""
        port = await self._passive_port()
        if self.tls_mode is not None:
            sent = await self._stor_tls(port, path, file, count)  # with its final 226
            if sent < count:
                raise FTPError("short_transfer", f"STOR {path}: only {sent} of {count} bytes sent")
            return sent
        sock = await self._open_raw(port)
        try:
            self.send(f"STOR {path}")
            await self._preliminary(f"STOR {path}")
            try:
                sent = await (sendfile_blocking if alone else sendfile)(sock, file.fileno(), 0, count)
            except OSError as e:
                raise FTPError("reset", f"STOR {path}: data connection: {e}") from e
        finally:
            self._drop_sock(sock)
        await self._final(f"STOR {path}")
        if sent < count:
            raise FTPError("short_transfer", f"STOR {path}: only {sent} of {count} bytes sent")
        return sent

    async def verify_size(self, path: str, expected: int) -> None:
        """``SIZE path`` must equal ``expected``; else FTPError(kind="short_transfer")."""
        got = await self.size(path)
        if got != expected:
            raise FTPError("short_transfer", f"STOR {path}: server SIZE {got}, sent {expected}")


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def _family_of(host: str) -> int:
    return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET


async def open_session(host: str, port: int, user: str, password: str, *, binary: bool = True,
                       **kw) -> FTPSession:
    """Connect, log in and (when ``binary``) set ``TYPE I``; returns the session.
    Keyword arguments go to :class:`FTPSession`. On failure the session is closed
    and FTPError raised."""
    s = FTPSession(host, port, **kw)
    try:
        await s.connect()
        await s.login(user, password)
        if binary:
            await s.type_binary()
    except BaseException:
        s.close()
        raise
    return s
