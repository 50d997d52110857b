"""A hostile FTP server on 127.0.0.1 for the tests of the runner's bounded exchanges:
one listening socket served by a thread, each connection by a thread of its own, all of
it closed after ``lifetime`` seconds or on :meth:`HostileFTP.close`.

Modes:

* ``drip``: ``220-`` continuation lines, one every 0.2 s, never the last line;
* ``flood``: ``220-`` continuation lines as fast as the socket takes them (at most
  :data:`FLOOD_BYTES` per connection, then silence);
* ``silent``: accepts and never says anything;
* ``pass_drip``: ``220`` greeting, ``331`` to USER, then ``230-`` lines dripped every
  0.2 s in answer to PASS (and to anything else);
* ``login_only`` (:data:`LOGIN_ONLY`): logs in, then never answers anything else.
"""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

MODES = ("drip", "flood", "silent", "pass_drip")
#: A server that logs in (``220``, ``331``, ``230``; ``200`` to TYPE/NOOP, ``221`` to QUIT)
#: and never answers any other command: it hangs whatever asks more of it.
LOGIN_ONLY = "login_only"
#: Most bytes the flood sends on one connection (far above any cap, bounded for the test).
FLOOD_BYTES = 64 << 20
DRIP_S = 0.2


class HostileFTP:
    """``with HostileFTP("drip") as srv:`` then connect to ``srv.port``. Raises ValueError
    for an unknown mode."""

    def __init__(self, mode: str, lifetime: float = 20.0) -> None:
        if mode not in (*MODES, LOGIN_ONLY):
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join((*MODES, LOGIN_ONLY))}")
        self.mode = mode
        self.end = time.monotonic() + lifetime
        self.stop = threading.Event()
        self.lsock = socket.create_server(("127.0.0.1", 0))
        self.lsock.settimeout(0.1)
        self.port = self.lsock.getsockname()[1]
        self.conns: list[socket.socket] = []
        self.threads: list[threading.Thread] = []
        self.accepted = 0

    def __enter__(self) -> HostileFTP:
        t = threading.Thread(target=self._accept, name=f"hostile-{self.mode}", daemon=True)
        t.start()
        self.threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _over(self) -> bool:
        return self.stop.is_set() or time.monotonic() >= self.end

    def _accept(self) -> None:
        while not self._over():
            try:
                conn, _ = self.lsock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            self.conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        try:
            getattr(self, f"_{self.mode}")(conn)
        except OSError:
            pass
        finally:
            conn.close()

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds``; False when the server is over."""
        return not self.stop.wait(seconds) and not self._over()

    def _drip(self, conn: socket.socket) -> None:
        while self._wait(DRIP_S):
            conn.sendall(b"220-still greeting you\r\n")

    def _flood(self, conn: socket.socket) -> None:
        chunk = b"220-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n" * 1000
        conn.settimeout(0.5)
        sent = 0
        while sent < FLOOD_BYTES and not self._over():
            try:
                conn.sendall(chunk)
            except TimeoutError:
                continue
            sent += len(chunk)
        while self._wait(0.1):
            pass

    def _silent(self, conn: socket.socket) -> None:
        while self._wait(0.1):
            pass

    def _lines(self, conn: socket.socket, greeting: bytes) -> Iterator[bytes]:
        """Send ``greeting``, then yield each line the peer sends (without its LF) until the
        server is over or the peer closes."""
        conn.sendall(greeting)
        conn.settimeout(0.1)
        buf = b""
        while not self._over():
            try:
                data = conn.recv(4096)
            except TimeoutError:
                continue
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                yield line

    def _pass_drip(self, conn: socket.socket) -> None:
        for line in self._lines(conn, b"220 hello\r\n"):
            if line.upper().startswith(b"USER"):
                conn.sendall(b"331 password please\r\n")
                continue
            while self._wait(DRIP_S):
                conn.sendall(b"230-almost logged in\r\n")

    def _login_only(self, conn: socket.socket) -> None:
        answers = {b"USER": b"331 password please\r\n", b"PASS": b"230 logged in\r\n", b"TYPE": b"200 ok\r\n",
                   b"NOOP": b"200 ok\r\n", b"QUIT": b"221 bye\r\n"}
        for line in self._lines(conn, b"220 hello\r\n"):
            answer = answers.get(line.split(b" ", 1)[0].strip().upper())
            if answer is not None:
                conn.sendall(answer)

    def close(self) -> None:
        """Stop accepting, close every connection, join the threads (bounded)."""
        self.stop.set()
        self.lsock.close()
        for c in list(self.conns):
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self.threads:
            t.join(timeout=2.0)
