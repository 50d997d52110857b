"""A tiny HTTP/1.1 upload server for the HTTP driver tests (loopback only).

Speaks the interface of the HTTP servers under test: ``PUT /uploads/<name>``
writes the body to ``<home>/uploads/<name>`` (201), ``POST /uploads/`` to a name it
picks (201), ``GET /<path>`` serves ``<home>/<path>`` (404 when missing). Modes:

* ``write`` (default): as above.
* ``nowrite``: answers 201 to every upload without writing anything.
* ``dropthird``: answers 201 to every upload but writes only the first and second of
  every three (``srv.written`` counts the files written).
* ``limit``: uploads with a body over ``limit`` bytes get 413 and the connection closed.
* ``close``: like ``write``, but every response says ``Connection: close`` and closes.
* ``chunked``: like ``write``, but GET bodies are sent chunked (16 KiB chunks).

Runs in a thread with its own asyncio loop; ``with HttpTestServer(home) as srv:`` gives
``srv.port`` and counters ``srv.uploads`` (bodies received), ``srv.written`` (files
written) and ``srv.requests``.
"""
from __future__ import annotations

import asyncio
import itertools
import threading
from pathlib import Path


class _Proto(asyncio.Protocol):
    def __init__(self, srv: HttpTestServer) -> None:
        self.srv = srv
        self.buf = b""
        self.body_left = 0
        self.body: list[bytes] = []
        self.req: tuple[str, str] | None = None
        self.tr: asyncio.Transport | None = None

    def connection_made(self, transport):  # noqa: ANN001
        self.tr = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        for _ in range(10000):
            if self.req is None:
                i = self.buf.find(b"\r\n\r\n")
                if i < 0:
                    return
                head, self.buf = self.buf[:i].decode("latin-1"), self.buf[i + 4:]
                lines = head.split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                hdr = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
                self.req = (method, path)
                self.body_left = int(hdr.get("content-length", "0"))
                self.body = []
                if method in ("PUT", "POST") and self.srv.mode == "limit" and self.body_left > self.srv.limit:
                    self._reply(413, b"too large\n", close=True)
                    return
            n = min(self.body_left, len(self.buf))
            if n:
                self.body.append(self.buf[:n])
                self.buf = self.buf[n:]
                self.body_left -= n
            if self.body_left:
                return
            self._handle()
            self.req = None
            if self.tr is None or self.tr.is_closing():
                return
            if not self.buf:
                return

    def _handle(self) -> None:
        assert self.req is not None
        method, path = self.req
        srv = self.srv
        srv.requests += 1
        if method in ("PUT", "POST"):
            body = b"".join(self.body)
            srv.uploads += 1
            if path.startswith("/uploads/"):
                name = path[len("/uploads/"):] or f"post-{next(srv.seq)}"
                if srv.mode != "nowrite" and not (srv.mode == "dropthird" and srv.uploads % 3 == 0):
                    (srv.home / "uploads" / name).write_bytes(body)
                    srv.written += 1
                self._reply(201, b"")
            else:
                self._reply(403, b"")
            return
        f = srv.home / path.lstrip("/")
        if method == "GET" and f.is_file():
            self._reply(200, f.read_bytes())
        else:
            self._reply(404, b"not found\n")

    def _reply(self, status: int, body: bytes, close: bool = False) -> None:
        assert self.tr is not None
        close = close or self.srv.mode == "close"
        conn = b"Connection: close\r\n" if close else b""
        if self.srv.mode == "chunked" and status == 200:
            chunks = b"".join(b"%x\r\n" % len(body[i:i + 16384]) + body[i:i + 16384] + b"\r\n"
                              for i in range(0, len(body), 16384))
            self.tr.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" + conn + b"\r\n" + chunks + b"0\r\n\r\n")
        else:
            self.tr.write(b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n" % (status, len(body)) + conn + b"\r\n" + body)
        if close:
            self.tr.close()


class HttpTestServer:
    """The server (module docstring) on ``127.0.0.1:port`` (port chosen by the kernel)."""

    def __init__(self, home: Path, mode: str = "write", limit: int = 1 << 20) -> None:
        self.home, self.mode, self.limit = Path(home), mode, limit
        (self.home / "uploads").mkdir(parents=True, exist_ok=True)
        self.port = 0
        self.uploads = self.requests = self.written = 0
        self.seq = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            self._loop.create_server(lambda: _Proto(self), "127.0.0.1", 0, backlog=1024))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        self._loop.run_until_complete(server.wait_closed())
        self._loop.close()

    def __enter__(self) -> HttpTestServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def stored(self) -> list[Path]:
        """Files under ``home/uploads``."""
        return sorted((self.home / "uploads").iterdir())


if __name__ == "__main__":  # python httpserver.py HOME [MODE]: prints "PORT n", serves until killed
    import sys
    import time

    with HttpTestServer(Path(sys.argv[1]), mode=sys.argv[2] if len(sys.argv) > 2 else "write") as _srv:
        print(f"PORT {_srv.port}", flush=True)
        for _ in range(3600):  # bounded: an hour at most
            time.sleep(1)
