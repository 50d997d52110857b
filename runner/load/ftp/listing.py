"""The metadata commands of an FTP session that the ``mixed`` workload uses (a mixin of
:class:`runner.load.ftp.session.FTPSession`): directory listings over a data connection
(``LIST``, RFC 959 section 4.1.3; ``MLSD``, RFC 3659 section 7), ``CWD``/``CDUP``,
``MDTM`` (RFC 3659 section 3), ``NOOP``, ``MKD``. Plain and TLS (``PROT P``) data
connections alike; every exchange is bounded by ``op_timeout`` and fails with
:class:`FTPError`.
"""
from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING

from runner.load.ftp.replies import FTPError, Reply, _with_timeout

#: Largest listing kept in memory (bytes): 100,000 entries of an MLSD line are about 10 MiB.
MAX_LISTING = 256 << 20


class _Collect(asyncio.Protocol):
    """A TLS data connection's payload, kept (bounded by :data:`MAX_LISTING`)."""

    def __init__(self, done: asyncio.Future) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.done = done

    def data_received(self, data: bytes) -> None:  # noqa: D102
        self.size += len(data)
        if self.size > MAX_LISTING:
            if not self.done.done():
                self.done.set_exception(FTPError("protocol", f"listing larger than {MAX_LISTING} bytes"))
            return
        self.chunks.append(data)

    def eof_received(self):  # noqa: D102
        if not self.done.done():
            self.done.set_result(None)
        return False

    def connection_lost(self, exc) -> None:  # noqa: D102
        if not self.done.done():
            self.done.set_result(None)


class ListingCommands:
    """LIST/MLSD, CWD, MDTM, NOOP and MKD of an FTP session (provided to FTPSession)."""

    if TYPE_CHECKING:  # provided by FTPSession
        op_timeout: float
        tls_mode: str | None
        _data_transports: set[asyncio.Transport]

        async def command(self, line: str, expect: tuple[int, ...]) -> Reply: ...
        def send(self, line: str) -> None: ...
        async def _passive_port(self) -> int: ...
        async def _open_raw(self, port: int) -> socket.socket: ...
        def _drop_sock(self, sock: socket.socket) -> None: ...
        async def _preliminary(self, what: str) -> None: ...
        async def _final(self, what: str) -> Reply: ...
        async def _data_tls(self, sock: socket.socket, proto: asyncio.BaseProtocol,
                            command: str) -> asyncio.Transport: ...

    async def listing(self, verb: str, path: str) -> bytes:
        """``LIST path`` or ``MLSD path`` (``verb``): PASV/EPSV, data connect, the command,
        the listing to EOF, the final ``226``; bounded as a whole by ``op_timeout``.
        Returns the listing's bytes. Raises FTPError (``protocol`` for a listing over
        :data:`MAX_LISTING` bytes or an unknown verb)."""
        if verb not in ("LIST", "MLSD", "NLST"):
            raise FTPError("protocol", f"not a listing command: {verb!r}")
        return await _with_timeout(self._listing(f"{verb} {path}"), self.op_timeout, verb)

    async def _listing(self, line: str) -> bytes:
        port = await self._passive_port()
        sock = await self._open_raw(port)
        loop = asyncio.get_running_loop()
        if self.tls_mode is not None:
            done = loop.create_future()
            proto = _Collect(done)
            transport = await self._data_tls(sock, proto, line)
            try:
                await done
            finally:
                self._data_transports.discard(transport)
                transport.abort()
            data = b"".join(proto.chunks)
        else:
            try:
                self.send(line)
                await self._preliminary(line)
                buf = bytearray()
                for _ in range(MAX_LISTING // 4096 + 1):  # bounded: every read takes at least one byte
                    try:
                        chunk = await loop.sock_recv(sock, 1 << 16)
                    except OSError as e:
                        raise FTPError("reset", f"{line}: data connection: {e}") from e
                    if not chunk:
                        break
                    buf += chunk
                    if len(buf) > MAX_LISTING:
                        raise FTPError("protocol", f"{line}: listing larger than {MAX_LISTING} bytes")
                data = bytes(buf)
            finally:
                self._drop_sock(sock)
        await self._final(line)
        return data

    async def cwd_and_back(self, path: str) -> None:
        """``CWD path`` (250) then ``CDUP`` (200 or 250): into a directory and out again."""
        await self.command(f"CWD {path}", (250, 200))
        await self.command("CDUP", (250, 200))

    async def mdtm(self, path: str) -> str:
        """``MDTM path`` (RFC 3659 section 3): the file's modification time as the server
        writes it (``YYYYMMDDHHMMSS[.sss]``, reply 213). Raises FTPError(kind="protocol")
        when the reply holds no such time."""
        r = await self.command(f"MDTM {path}", (213,))
        t = r.text.strip().split()[0] if r.text.strip() else ""
        if len(t) < 14 or not t[:14].isdigit():
            raise FTPError("protocol", f"MDTM: cannot parse {r.text[:80]!r}")
        return t

    async def noop(self) -> None:
        """``NOOP`` (200)."""
        await self.command("NOOP", (200,))

    async def mkd(self, path: str) -> None:
        """``MKD path`` (257); a directory that already exists (550) is not an error."""
        try:
            await self.command(f"MKD {path}", (257, 250))
        except FTPError as e:
            if e.code != 550:
                raise


def listing_names(data: bytes, verb: str) -> list[str]:
    """The entry names of a listing: MLSD lines ``facts; name`` (RFC 3659 section 7.2;
    ``type=cdir``/``pdir`` entries dropped), LIST lines in the ``ls -l`` form (the text
    after the eighth field; ``total N`` lines, ``.`` and ``..`` dropped), NLST one name a
    line."""
    out = []
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.rstrip("\r")
        if not line:
            continue
        if verb == "MLSD":
            facts, _, name = line.partition(" ")
            if "type=cdir" in facts.lower() or "type=pdir" in facts.lower():
                continue
        elif verb == "LIST":
            if line.startswith("total "):
                continue
            parts = line.split(None, 8)
            name = parts[8] if len(parts) == 9 else parts[-1]
        else:
            name = line.rsplit("/", 1)[-1]
        if name not in (".", ".."):
            out.append(name)
    return out
