"""FTP replies and errors (RFC 959 section 4.2, RFC 2428 section 3): the error kinds the
load generator counts, the incremental reply parser, and the ports of ``227``/``229``
passive replies, and the bound of one awaited operation. No sockets: :mod:`runner.load.ftp.session`
speaks it."""
from __future__ import annotations

import asyncio
import errno
import re
import ssl
from dataclasses import dataclass

#: Error kinds, as PhaseResult.errors counts them.
ERROR_KINDS = ("refused", "timeout", "reply_425", "reply_4xx", "reply_5xx", "short_transfer",
               "protocol", "reset", "tls_verify", "tls_timeout", "tls_refused", "tls_error")

#: Longest reply line accepted (bytes); RFC 959 sets no limit, servers stay far below.
MAX_LINE = 64 * 1024
#: Most lines in one multi-line reply (bounds the parser on a misbehaving peer).
MAX_REPLY_LINES = 10_000
#: Most replies queued unread on a control connection (runner.load.ftp.session); more is a peer
#: sending replies nobody asked for (a protocol error: the connection is aborted).
MAX_PENDING_REPLIES = 64
#: Most ``1xx`` preliminary replies skipped before the greeting (runner.load.ftp.session).
MAX_PRELIMINARY = 8
#: Most bytes of one reply, all its lines together (bounds the memory a peer that floods
#: continuation lines can make the parser hold).
MAX_REPLY_BYTES = 256 * 1024


class FTPError(Exception):
    """A failed FTP operation.

    Attributes:
        kind: one of :data:`ERROR_KINDS`: ``refused`` (TCP connect refused),
            ``timeout`` (an operation exceeded its bound), ``reply_425`` ("Can't
            open data connection", RFC 959 section 4.2: counted apart because it
            is what a server out of passive ports answers), ``reply_4xx`` (any
            other transient negative reply) / ``reply_5xx`` (permanent negative
            reply, RFC 959 section 4.2), ``short_transfer``
            (fewer payload bytes than the server confirmed or the file holds),
            ``protocol`` (unparseable or unexpected reply), ``reset`` (connection
            reset / closed by the peer unexpectedly); FTPS (runner.load.ftp.tls):
            ``tls_verify`` (certificate verify failed: unknown CA, wrong name),
            ``tls_timeout`` (TLS handshake not done within the connect timeout),
            ``tls_refused`` (the server answered ``AUTH TLS`` with anything but 234),
            ``tls_error`` (any other TLS failure: no shared protocol or cipher, bad record).
        code: the 3-digit reply code when the error came from a reply, else None.
    """

    def __init__(self, kind: str, message: str, code: int | None = None):
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.code = code


def classify(exc: BaseException) -> str:
    """Map an exception to an error kind of :data:`ERROR_KINDS`.

    FTPError keeps its kind; ssl.SSLCertVerificationError -> ``tls_verify``, another
    ssl.SSLError -> ``tls_error``; TimeoutError -> ``timeout``; ConnectionRefusedError ->
    ``refused``; other connection errors (reset, broken pipe, aborted) and EOF ->
    ``reset``; OSError with ECONNREFUSED -> ``refused``; anything else -> ``protocol``.
    """
    if isinstance(exc, FTPError):
        return exc.kind
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "tls_verify"
    if isinstance(exc, ssl.SSLError):
        return "tls_error"
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
    :data:`MAX_LINE`, more than :data:`MAX_REPLY_LINES` lines or :data:`MAX_REPLY_BYTES`
    bytes in one reply.
    """

    __slots__ = ("_buf", "_code", "_lines", "_size")

    def __init__(self) -> None:
        self._buf = b""
        self._code: bytes | None = None  # code of the multi-line reply in progress
        self._lines: list[str] = []
        self._size = 0  # bytes of the multi-line reply in progress

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
                self._size = len(line)
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
        self._size += len(line)
        if self._size > MAX_REPLY_BYTES:
            raise FTPError("protocol", f"multi-line reply longer than {MAX_REPLY_BYTES} bytes")
        self._lines.append(line.decode("utf-8", "replace"))
        return None


async def _with_timeout(aw, timeout: float, what: str):
    """Await ``aw`` bounded by ``timeout`` seconds; raise FTPError(kind="timeout")."""
    try:
        async with asyncio.timeout(timeout):
            return await aw
    except TimeoutError:
        raise FTPError("timeout", f"{what}: no completion within {timeout:g} s") from None


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


def reply_error(r: Reply, what: str) -> FTPError:
    """The FTPError of an unexpected reply ``r`` to ``what``: kind ``reply_425``, ``reply_4xx``,
    ``reply_5xx`` or ``protocol`` (any other code), the message holding the code and text."""
    if r.code == 425:
        return FTPError("reply_425", f"{what}: {r.code} {r.text[:200]}", r.code)
    if 400 <= r.code < 500:
        return FTPError("reply_4xx", f"{what}: {r.code} {r.text[:200]}", r.code)
    if 500 <= r.code < 600:
        return FTPError("reply_5xx", f"{what}: {r.code} {r.text[:200]}", r.code)
    return FTPError("protocol", f"{what}: unexpected reply {r.code} {r.text[:200]}", r.code)
