"""A loopback HTTP/1.1 server of known service time, in its own process (no GIL shared
with the client under test): every ``GET`` is answered ``200`` with a body of ``--size``
bytes exactly ``--delay-ms`` after its request head was read (``loop.call_later``; the
loop keeps serving other connections meanwhile). Keep-alive; anything but GET gets 405.

    python -m tests.support.delay_http --delay-ms 40 --size 1024 [--lifetime 60]

prints the port it listens on (127.0.0.1, chosen by the kernel) on its first line and
exits after ``--lifetime`` seconds at most. :func:`delay_server` runs it for a test.
"""
from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


class _Proto(asyncio.Protocol):
    def __init__(self, delay_s: float, body: bytes) -> None:
        self.delay_s, self.body, self.buf = delay_s, body, b""
        self.tr: asyncio.Transport | None = None

    def connection_made(self, transport):  # noqa: ANN001
        self.tr = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        for _ in range(1000):
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                return
            head, self.buf = self.buf[:i], self.buf[i + 4:]
            ok = head.startswith(b"GET ")
            asyncio.get_running_loop().call_later(self.delay_s, self._reply, ok)

    def _reply(self, ok: bool) -> None:
        if self.tr is None or self.tr.is_closing():
            return
        body = self.body if ok else b""
        status = b"200 OK" if ok else b"405 Method Not Allowed"
        self.tr.write(b"HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n" % (status, len(body)) + body)


async def _serve(delay_s: float, size: int, lifetime: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Proto(delay_s, b"x" * size), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(lifetime)
    server.close()


@contextmanager
def delay_server(delay_ms: float, size: int, lifetime: float = 60.0) -> Iterator[int]:
    """Run the server (module docstring) in a child process; yields its port; kills it."""
    p = subprocess.Popen([sys.executable, "-m", "tests.support.delay_http", "--delay-ms", repr(delay_ms),
                          "--size", str(size), "--lifetime", repr(lifetime)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        yield int(p.stdout.readline())
    finally:
        p.kill()
        p.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay-ms", type=float, required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--lifetime", type=float, default=60.0)
    a = ap.parse_args()
    if not (0 <= a.delay_ms <= 10_000 and 0 <= a.size <= 1 << 24 and 0 < a.lifetime <= 600):
        ap.error("delay-ms in [0, 10000], size in [0, 16 MiB], lifetime in (0, 600]")
    asyncio.run(_serve(a.delay_ms / 1000.0, a.size, a.lifetime))


if __name__ == "__main__":
    main()
