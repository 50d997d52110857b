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
* ``STOR`` sends from a local file with ``loop.sock_sendfile`` (``os.sendfile``,
  zero-copy; no fallback to read/send).

Every await is bounded by a timeout. Every failure is raised as :class:`FTPError`
with a ``kind`` from :data:`ERROR_KINDS`, so callers count errors by kind.
"""
from __future__ import annotations

import asyncio
import errno
import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import BinaryIO, Literal

#: Error kinds, as PhaseResult.errors counts them.
ERROR_KINDS = ("refused", "timeout", "reply_4xx", "reply_5xx", "short_transfer", "protocol", "reset")

#: Longest reply line accepted (bytes); RFC 959 sets no limit, servers stay far below.
MAX_LINE = 64 * 1024
#: Most lines in one multi-line reply (bounds the parser on a misbehaving peer).
MAX_REPLY_LINES = 10_000


class FTPError(Exception):
    """A failed FTP operation.

    Attributes:
        kind: one of :data:`ERROR_KINDS`: ``refused`` (TCP connect refused),
            ``timeout`` (an operation exceeded its bound), ``reply_4xx`` /
            ``reply_5xx`` (negative reply, RFC 959 section 4.2), ``short_transfer``
            (fewer payload bytes than the server confirmed or the file holds),
            ``protocol`` (unparseable or unexpected reply), ``reset`` (connection
            reset / closed by the peer unexpectedly).
        code: the 3-digit reply code when the error came from a reply, else None.
    """

    def __init__(self, kind: str, message: str, code: int | None = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.code = code


def classify(exc: BaseException) -> str:
    """Map an exception to an error kind of :data:`ERROR_KINDS`.

    FTPError keeps its kind; TimeoutError -> ``timeout``; ConnectionRefusedError ->
    ``refused``; other connection errors (reset, broken pipe, aborted) and EOF ->
    ``reset``; OSError with ECONNREFUSED -> ``refused``; anything else -> ``protocol``.
    """
    if isinstance(exc, FTPError):
        return exc.kind
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, (ConnectionError, EOFError, asyncio.IncompleteReadError)):
        return "reset"
    if isinstance(exc, OSError):
        if exc.errno == errno.ECONNREFUSED:
            return "refused"
        if exc.errno in (errno.ETIMEDOUT,):
            return "timeout"
        return "reset"
    return "protocol"


@dataclass(frozen=True)
class Reply:
    """One complete FTP reply (RFC 959 section 4.2).

    Attributes:
        code: 3-digit reply code, e.g. 226.
        text: the reply text, lines joined with ``\\n`` (codes and separators stripped
            from the first and last line only).
    """

    code: int
    text: str


class ReplyParser:
    """Incremental parser of FTP replies from a byte stream (RFC 959 section 4.2).

    A single-line reply is ``"ddd text\\r\\n"``. A multi-line reply starts with
    ``"ddd-text"`` and ends with the first later line that starts with the same code
    followed by a space (``"ddd text"``); lines in between may hold anything,
    including other codes. Lines end with CRLF; a bare LF is accepted too.

    ``feed(data)`` returns the list of replies completed by ``data`` (possibly empty).
    Raises FTPError(kind="protocol") on a malformed first line, a line longer than
    :data:`MAX_LINE`, or more than :data:`MAX_REPLY_LINES` lines in one reply.
    """

    __slots__ = ("_buf", "_code", "_lines")

    def __init__(self) -> None:
        self._buf = b""
        self._code: bytes | None = None  # code of the multi-line reply in progress
        self._lines: list[str] = []

    def feed(self, data: bytes) -> list[Reply]:
        """Consume ``data``; return the replies it completes, in order."""
        buf = self._buf + data if self._buf else data
        out: list[Reply] = []
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            r = self._line(line)
            if r is not None:
                out.append(r)
        rest = buf[start:]
        if len(rest) > MAX_LINE:
            raise FTPError("protocol", f"reply line longer than {MAX_LINE} bytes")
        self._buf = rest
        return out

    def _line(self, line: bytes) -> Reply | None:
        if self._code is None:
            code = line[:3]
            if len(line) < 3 or not code.isdigit():
                raise FTPError("protocol", f"malformed reply line {line[:80]!r}")
            sep = line[3:4]
            if sep == b"-":
                self._code = code
                self._lines = [line[4:].decode("utf-8", "replace")]
                return None
            if sep not in (b" ", b""):
                raise FTPError("protocol", f"malformed reply line {line[:80]!r}")
            return Reply(int(code), line[4:].decode("utf-8", "replace"))
        if line[:3] == self._code and line[3:4] == b" ":
            self._lines.append(line[4:].decode("utf-8", "replace"))
            r = Reply(int(self._code), "\n".join(self._lines))
            self._code = None
            self._lines = []
            return r
        if len(self._lines) >= MAX_REPLY_LINES:
            raise FTPError("protocol", f"multi-line reply longer than {MAX_REPLY_LINES} lines")
        self._lines.append(line.decode("utf-8", "replace"))
        return None


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
        except FTPError as e:
            self.error = e
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


class _RetrProtocol(asyncio.BufferedProtocol):
    """RETR data connection: receives into a shared buffer, counts bytes, signals EOF."""

    def __init__(self, buf: memoryview, done: asyncio.Future) -> None:
        self.buf = buf
        self.nbytes = 0
        self.done = done

    def get_buffer(self, sizehint: int) -> memoryview:  # noqa: D102
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:  # noqa: D102
        self.nbytes += nbytes

    def eof_received(self):  # noqa: D102
        if not self.done.done():
            self.done.set_result(None)
        return False

    def connection_lost(self, exc) -> None:  # noqa: D102
        if not self.done.done():
            if exc is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(exc)


_SCRATCH: dict[int, bytearray] = {}


def scratch_buffer(size: int) -> memoryview:
    """A process-wide receive buffer of ``size`` bytes, shared by all RETR sessions.

    Received payload is only counted, never read, and each ``recv_into`` completes
    synchronously on the single event-loop thread, so sharing one buffer is safe and
    keeps the client's cache footprint small even with hundreds of sessions.
    """
    b = _SCRATCH.get(size)
    if b is None:
        b = _SCRATCH[size] = bytearray(size)
    return memoryview(b)


_PASV_RE = re.compile(rb"(\d{1,3}),(\d{1,3}),(\d{1,3}),(\d{1,3}),(\d{1,3}),(\d{1,3})")


def parse_pasv(text: str) -> int:
    """Port from a ``227`` reply text (RFC 959 section 4.1.2: ``h1,h2,h3,h4,p1,p2``;
    port = p1 * 256 + p2). The announced host is ignored: the data connection goes to
    the control connection's host (as ftplib does by default, safe behind NAT).
    Raises FTPError(kind="protocol") when the text holds no address."""
    m = _PASV_RE.search(text.encode())
    if not m:
        raise FTPError("protocol", f"cannot parse PASV reply {text[:80]!r}")
    p1, p2 = int(m.group(5)), int(m.group(6))
    if p1 > 255 or p2 > 255:
        raise FTPError("protocol", f"bad port in PASV reply {text[:80]!r}")
    return p1 * 256 + p2


def parse_epsv(text: str) -> int:
    """Port from a ``229`` reply text (RFC 2428 section 3: ``(<d><d><d>port<d>)``,
    where ``<d>`` is any one delimiter character, usually ``|``).
    Raises FTPError(kind="protocol") when the text holds no port."""
    i = text.find("(")
    j = text.find(")", i + 1)
    if i < 0 or j < 0 or j - i < 6:
        raise FTPError("protocol", f"cannot parse EPSV reply {text[:80]!r}")
    inner = text[i + 1:j]
    d = inner[0]
    parts = inner.split(d)
    # "|||6446|" -> ['', '', '', '6446', '']
    if len(parts) != 5 or not parts[3].isdigit():
        raise FTPError("protocol", f"cannot parse EPSV reply {text[:80]!r}")
    port = int(parts[3])
    if not 0 < port < 65536:
        raise FTPError("protocol", f"bad port in EPSV reply {text[:80]!r}")
    return port


def _reply_error(r: Reply, what: str) -> FTPError:
    if 400 <= r.code < 500:
        return FTPError("reply_4xx", f"{what}: {r.code} {r.text[:200]}", r.code)
    if 500 <= r.code < 600:
        return FTPError("reply_5xx", f"{what}: {r.code} {r.text[:200]}", r.code)
    return FTPError("protocol", f"{what}: unexpected reply {r.code} {r.text[:200]}", r.code)


async def _with_timeout(aw, timeout: float, what: str):
    """Await ``aw`` bounded by ``timeout`` seconds; raise FTPError(kind="timeout")."""
    try:
        async with asyncio.timeout(timeout):
            return await aw
    except TimeoutError:
        raise FTPError("timeout", f"{what}: no completion within {timeout:g} s") from None


RetrMode = Literal["protocol", "recv_into", "reader"]
#: Most recv_into calls per readiness callback in "reader" mode (fairness bound).
_DRAIN = 8


class FTPSession:
    """One FTP control connection and the data connections it opens.

    Args:
        host: server IP address or name (loopback in tests).
        port: FTP control port.
        op_timeout: bound on each operation (s): connect, one reply, one whole
            transfer (data connect + payload + final reply).
        passive: ``"pasv"`` (RFC 959) or ``"epsv"`` (RFC 2428) data connections.
        buffer_size: RETR receive buffer (bytes), shared across sessions.
        retr_mode: how RETR payload is read, always into one shared preallocated buffer:
            ``"reader"`` (default: raw non-blocking socket, ``loop.add_reader``
            callback draining up to 8 ``recv_into`` per wake-up), ``"protocol"``
            (asyncio BufferedProtocol ``get_buffer``/``buffer_updated``) or
            ``"recv_into"`` (``await loop.sock_recv_into`` loop). Measured by
            benchmarks/loadgen_selftest.py: "reader" with SO_RCVLOWAT used the least
            client CPU per GiB (below a blocking recv_into reader) on loopback.
        rcvlowat: SO_RCVLOWAT (socket(7)) on RETR data sockets, so a wake-up finds at
            least this many bytes queued (fewer wake-ups per GiB); None = half of
            ``buffer_size``, 0 = leave the kernel default (1 byte).

    All methods raise :class:`FTPError` (with a kind) on failure. ``close()`` never
    raises. Use ``async with FTPSession(...) as s`` or call ``close()``.
    """

    def __init__(self, host: str, port: int, *, op_timeout: float = 30.0,
                 passive: Literal["pasv", "epsv"] = "pasv", buffer_size: int = 256 * 1024,
                 retr_mode: RetrMode = "reader", rcvlowat: int | None = None) -> None:
        self.host = host
        self.port = port
        self.op_timeout = op_timeout
        self.passive = passive
        self.buffer_size = buffer_size
        self.retr_mode = retr_mode
        self.rcvlowat = buffer_size // 2 if rcvlowat is None else rcvlowat
        self._proto: _ControlProtocol | None = None
        self._family = socket.AF_INET
        self._data_socks: set[socket.socket] = set()
        self._data_transports: set[asyncio.BaseTransport] = set()

    # -- control connection -------------------------------------------------------
    async def connect(self) -> Reply:
        """Open the control connection and read the greeting (``220``; a ``120``
        preliminary is skipped). Returns the greeting reply."""
        loop = asyncio.get_running_loop()
        try:
            self._family = _family_of(self.host)
        except ValueError:
            self._family = socket.AF_UNSPEC
        try:
            async with asyncio.timeout(self.op_timeout):
                _, proto = await loop.create_connection(_ControlProtocol, self.host, self.port)
        except TimeoutError:
            raise FTPError("timeout", f"connect to {self.host}:{self.port}: no answer within "
                                      f"{self.op_timeout:g} s") from None
        except OSError as e:
            raise FTPError(classify(e), f"connect to {self.host}:{self.port}: {e}") from e
        self._proto = proto
        if self._family == socket.AF_UNSPEC:
            self._family = proto.transport.get_extra_info("socket").family
        r = await self.read_reply("greeting")
        while 100 <= r.code < 200:
            r = await self.read_reply("greeting")
        if r.code != 220:
            raise _reply_error(r, "greeting")
        return r

    async def read_reply(self, what: str = "reply") -> Reply:
        """Next complete reply on the control connection, bounded by ``op_timeout``."""
        p = self._proto
        if p is None:
            raise FTPError("protocol", f"{what}: not connected")
        if not p.replies:
            if p.error is not None:
                raise p.error
            loop = asyncio.get_running_loop()
            w = p.waiter = loop.create_future()
            h = loop.call_later(self.op_timeout, _expire, w)
            try:
                await w
            finally:
                h.cancel()
                p.waiter = None
            if not p.replies:
                if p.error is not None:
                    raise p.error
                raise FTPError("timeout", f"{what}: no reply within {self.op_timeout:g} s")
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
            raise _reply_error(r, line.split(" ", 1)[0])
        return r

    async def login(self, user: str, password: str) -> None:
        """``USER``/``PASS`` (RFC 959 section 4.1.1): 230 after USER or 331/332 then 230."""
        r = await self.command(f"USER {user}", (230, 331, 332))
        if r.code != 230:
            await self.command(f"PASS {password}", (230, 202))

    async def type_binary(self) -> None:
        """``TYPE I`` (image/binary), needed for RETR/STOR byte counts and SIZE."""
        await self.command("TYPE I", (200,))

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

    async def quit(self) -> None:
        """``QUIT``: expect 221, then wait (bounded) until the server closes the
        connection, then close our side."""
        try:
            await self.command("QUIT", (221,))
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
            raise _reply_error(r, what)

    async def _final(self, what: str) -> Reply:
        r = await self.read_reply(what)
        if r.code not in (226, 250):
            raise _reply_error(r, what)
        return r

    async def retr(self, path: str, expected: int) -> int:
        """Download ``path`` and count its bytes: PASV/EPSV, data connect, ``RETR``,
        payload to EOF, final ``226``. The whole transfer is bounded by ``op_timeout``.

        Returns the bytes received, which equal ``expected``. Raises
        FTPError(kind="short_transfer") when fewer bytes arrived than ``expected``
        though the server confirmed the transfer, ``protocol`` when more arrived.
        """
        return await _with_timeout(self._retr(path, expected), self.op_timeout, f"RETR {path}")

    async def _retr(self, path: str, expected: int) -> int:
        port = await self._passive_port()
        if self.retr_mode == "recv_into":
            n = await self._retr_recv_into(port, path)
        elif self.retr_mode == "reader":
            n = await self._retr_reader(port, path)
        else:
            n = await self._retr_protocol(port, path)
        await self._final(f"RETR {path}")
        if n < expected:
            raise FTPError("short_transfer", f"RETR {path}: {n} of {expected} bytes received, "
                                             "server confirmed 226")
        if n > expected:
            raise FTPError("protocol", f"RETR {path}: {n} bytes received, expected {expected}")
        return n

    async def _retr_protocol(self, port: int, path: str) -> int:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        proto = _RetrProtocol(scratch_buffer(self.buffer_size), done)
        try:
            transport, _ = await loop.create_connection(lambda: proto, self.host, port)
        except OSError as e:
            raise FTPError(classify(e), f"data connect to {self.host}:{port}: {e}") from e
        self._data_transports.add(transport)
        if self.rcvlowat:
            transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT,
                                                          self.rcvlowat)
        try:
            self.send(f"RETR {path}")
            await self._preliminary(f"RETR {path}")
            try:
                await done
            except OSError as e:
                raise FTPError("reset", f"RETR {path}: data connection: {e}") from e
            return proto.nbytes
        finally:
            self._data_transports.discard(transport)
            transport.abort()

    async def _retr_reader(self, port: int, path: str) -> int:
        loop = asyncio.get_running_loop()
        sock = await self._open_raw(port)
        if self.rcvlowat:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, self.rcvlowat)
        buf = scratch_buffer(self.buffer_size)
        done = loop.create_future()
        count = [0]
        recv_into = sock.recv_into
        fd = sock.fileno()

        def readable() -> None:
            n = 0
            try:
                for _ in range(_DRAIN):
                    k = recv_into(buf)
                    if not k:
                        loop.remove_reader(fd)
                        if not done.done():
                            done.set_result(None)
                        break
                    n += k
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                loop.remove_reader(fd)
                if not done.done():
                    done.set_exception(e)
            count[0] += n

        try:
            self.send(f"RETR {path}")
            await self._preliminary(f"RETR {path}")
            loop.add_reader(fd, readable)
            try:
                await done
            except OSError as e:
                raise FTPError("reset", f"RETR {path}: data connection: {e}") from e
        finally:
            loop.remove_reader(fd)
            self._drop_sock(sock)
        return count[0]

    async def _retr_recv_into(self, port: int, path: str) -> int:
        loop = asyncio.get_running_loop()
        sock = await self._open_raw(port)
        buf = scratch_buffer(self.buffer_size)
        n = 0
        try:
            self.send(f"RETR {path}")
            await self._preliminary(f"RETR {path}")
            recv_into = loop.sock_recv_into
            while True:
                k = await recv_into(sock, buf)
                if not k:
                    break
                n += k
        except OSError as e:
            raise FTPError("reset", f"RETR {path}: data connection: {e}") from e
        finally:
            self._drop_sock(sock)
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

    async def stor_transfer(self, path: str, file: BinaryIO, count: int) -> int:
        """The timed part of :meth:`stor` (no timeout of its own, no SIZE check).
        Returns the bytes sent and confirmed by ``226``."""
        loop = asyncio.get_running_loop()
        port = await self._passive_port()
        sock = await self._open_raw(port)
        try:
            self.send(f"STOR {path}")
            await self._preliminary(f"STOR {path}")
            try:
                sent = await loop.sock_sendfile(sock, file, 0, count, fallback=False)
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
