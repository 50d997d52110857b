"""An incremental HTTP/1.1 response reader for the load generator (runner.load.http.client).

Only what a benchmark client needs, with as little Python work per response as
possible: the status line, ``Content-Length`` or ``Transfer-Encoding: chunked``,
``Connection: close``; bodies are counted, never kept. Bytes are fed as they arrive
(:meth:`ResponseReader.feed`, any split); a complete response is reported once.
"""
from __future__ import annotations

#: A response head longer than this (bytes) is a protocol error (no server under test sends one).
MAX_HEAD = 64 * 1024
_EOH = b"\r\n\r\n"


class ResponseError(Exception):
    """The bytes received are not an HTTP/1.x response this reader understands; the
    message says what was wrong (counted as a network failure, kind ``protocol``)."""


class ResponseReader:
    """Reads one response after another from one connection.

    After :meth:`feed` returned True, ``status`` (int), ``body_bytes`` (bytes of the
    body, chunk framing excluded) and ``close`` (the server said ``Connection: close``,
    or sent an HTTP/1.0 response without keep-alive) describe the response just
    completed; call :meth:`reset` before the next request's bytes are fed. ``head_only``
    is for responses to HEAD (no body whatever the headers say).
    """

    __slots__ = ("buf", "status", "body_bytes", "close", "_left", "_chunked", "_state", "head_only")

    def __init__(self) -> None:
        self.buf = b""
        self.head_only = False
        self.reset()

    def reset(self) -> None:
        """Forget the last response (any bytes already buffered after it are kept)."""
        self.status = 0
        self.body_bytes = 0
        self.close = False
        self._left = 0
        self._chunked = False
        self._state = 0  # 0 head, 1 body by length, 2 chunk size line, 3 chunk data + CRLF, 4 trailer, 5 done

    def feed(self, data: bytes) -> bool:
        """Add received ``data``; True when the current response is complete (the bytes
        of the next one, if any, stay buffered). Raises ResponseError on a malformed
        response."""
        if self._state == 1 and not self.buf:  # the common case of a large body: count and drop
            n = len(data)
            if n < self._left:
                self._left -= n
                self.body_bytes += n
                return False
        self.buf += data
        return self._advance()

    def _advance(self) -> bool:
        for _ in range(1 << 20):  # bounded: each turn consumes bytes or returns
            st = self._state
            if st == 0:
                if not self._head():
                    return False
            elif st == 1:
                n = min(len(self.buf), self._left)
                self.body_bytes += n
                self._left -= n
                self.buf = self.buf[n:]
                if self._left:
                    return False
                self._state = 5
            elif st in (2, 4):
                i = self.buf.find(b"\r\n")
                if i < 0:
                    if len(self.buf) > 4096:
                        raise ResponseError("chunk size line too long")
                    return False
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                if st == 4:
                    if not line:
                        self._state = 5
                    continue
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise ResponseError(f"bad chunk size {line[:40]!r}") from None
                if size < 0:
                    raise ResponseError(f"bad chunk size {line[:40]!r}")
                self.body_bytes += size
                self._left = size + 2
                self._state = 3 if size else 4
            elif st == 3:
                n = min(len(self.buf), self._left)
                self._left -= n
                self.buf = self.buf[n:]
                if self._left:
                    return False
                self._state = 2
            else:
                return True
        raise ResponseError("response does not end")  # pragma: no cover - bounded loop guard

    def _head(self) -> bool:
        buf = self.buf
        i = buf.find(_EOH)
        if i < 0:
            if len(buf) > MAX_HEAD:
                raise ResponseError(f"response head over {MAX_HEAD} bytes")
            return False
        if not buf.startswith(b"HTTP/1.") or len(buf) < 12:
            raise ResponseError(f"not an HTTP/1.x status line: {buf[:40]!r}")
        try:
            status = int(buf[9:12])
        except ValueError:
            raise ResponseError(f"bad status line {buf[:40]!r}") from None
        head = buf[:i + 2].lower()
        self.buf = buf[i + 4:]
        if status < 200:  # 1xx (100 Continue): another head follows
            return True
        self.status = status
        http10 = buf[7:8] == b"0"
        self.close = b"\r\nconnection: close" in head or (http10 and b"\r\nconnection: keep-alive" not in head)
        if self.head_only or status in (204, 304):
            self._state = 5
            return True
        j = head.find(b"\r\ncontent-length:")
        if j >= 0:
            try:
                self._left = int(head[j + 17:head.index(b"\r\n", j + 2)])
            except ValueError:
                raise ResponseError("bad Content-Length") from None
            self._state = 1 if self._left else 5
        elif b"\r\ntransfer-encoding:" in head and b"chunked" in head:
            self._state = 2
        else:
            raise ResponseError(f"status {status} without Content-Length or chunked body (read-until-close "
                                "responses are not supported)")
        return True
