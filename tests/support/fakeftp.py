"""A tiny scripted FTP peer on 127.0.0.1 for failure-mode tests (not a server under
test: it exists to misbehave on purpose). Runs in the test's event loop."""
from __future__ import annotations

import asyncio


class FakeFTP:
    """Scripted FTP server.

    Args:
        greeting: raw bytes sent on connect (may be a multi-line reply); None = silent.
        login_reply: raw bytes answering PASS.
        file_size: size announced by SIZE for any file.
        retr_send: bytes actually sent on RETR before closing the data connection
            (less than file_size = short transfer), followed by ``226``.
        stor_size: what SIZE answers after a STOR (None = bytes received).
        greeting_delays: seconds to wait before greeting the 1st, 2nd, ... connection
            (connections past the list are greeted at once).
        quit_linger: seconds the connection stays open after the ``221`` to QUIT (a
            server whose session processes exit slowly); :attr:`quits` counts the QUITs.
    """

    def __init__(self, *, greeting: bytes | None = b"220 fake ready\r\n",
                 login_reply: bytes = b"230 ok\r\n", file_size: int = 1 << 20,
                 retr_send: int | None = None, stor_size: int | None = None,
                 greeting_delays: tuple[float, ...] = (), quit_linger: float = 0.0) -> None:
        self.greeting_delays = list(greeting_delays)
        self.quit_linger = quit_linger
        self.quits = 0
        self.connections = 0
        self.greeting = greeting
        self.login_reply = login_reply
        self.file_size = file_size
        self.retr_send = file_size if retr_send is None else retr_send
        self.stor_size = stor_size
        self.server: asyncio.base_events.Server | None = None
        self.port = 0
        self.received: dict[str, int] = {}
        self._tasks: set[asyncio.Task] = set()
        self._writers: list[asyncio.StreamWriter] = []
        self._data_servers: list[asyncio.base_events.Server] = []

    async def __aenter__(self) -> FakeFTP:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        for srv in self._data_servers:
            srv.close()
        for w in self._writers:
            w.transport.abort()
        for t in self._tasks:
            t.cancel()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        n = self.connections
        self.connections += 1
        if n < len(self.greeting_delays):
            await asyncio.sleep(self.greeting_delays[n])
        if self.greeting is None:  # silent: hold the connection, never answer
            await reader.read()
            return
        writer.write(self.greeting)
        data_conn: asyncio.Future | None = None
        for _ in range(1000):
            line = await reader.readline()
            if not line:
                return
            cmd, _, arg = line.decode().strip().partition(" ")
            cmd = cmd.upper()
            if cmd == "USER":
                writer.write(b"331 password please\r\n")
            elif cmd == "PASS":
                writer.write(self.login_reply)
            elif cmd == "TYPE":
                writer.write(b"200 binary\r\n")
            elif cmd in ("PASV", "EPSV"):
                data_conn = asyncio.get_running_loop().create_future()

                async def on_data(r, w, fut=data_conn):
                    if not fut.done():
                        fut.set_result((r, w))

                srv = await asyncio.start_server(on_data, "127.0.0.1", 0)
                self._data_servers.append(srv)
                port = srv.sockets[0].getsockname()[1]
                if cmd == "PASV":
                    writer.write(f"227 Entering Passive Mode (127,0,0,1,{port >> 8},"
                                 f"{port & 255}).\r\n".encode())
                else:
                    writer.write(f"229 Entering Extended Passive Mode (|||{port}|)\r\n".encode())
            elif cmd == "SIZE":
                size = self.received.get(arg, self.file_size)
                if arg in self.received and self.stor_size is not None:
                    size = self.stor_size
                writer.write(f"213 {size}\r\n".encode())
            elif cmd == "RETR":
                r, w = await data_conn
                writer.write(b"150 sending\r\n")
                left = self.retr_send
                chunk = b"x" * 65536
                while left > 0:
                    k = min(left, len(chunk))
                    w.write(chunk[:k])
                    left -= k
                await w.drain()
                w.close()
                writer.write(b"226 transfer complete\r\n")
            elif cmd == "STOR":
                r, w = await data_conn
                writer.write(b"150 send it\r\n")
                n = 0
                for _ in range(1 << 20):
                    b = await r.read(65536)
                    if not b:
                        break
                    n += len(b)
                w.close()
                self.received[arg] = n
                writer.write(b"226 stored\r\n")
            elif cmd == "DELE":
                writer.write(b"250 deleted\r\n")
            elif cmd == "QUIT":
                writer.write(b"221 bye\r\n")
                await writer.drain()
                self.quits += 1
                if self.quit_linger:
                    await asyncio.sleep(self.quit_linger)
                writer.close()
                return
            else:
                writer.write(b"502 not implemented\r\n")
