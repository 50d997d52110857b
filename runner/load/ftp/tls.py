"""FTPS in the load generator (RFC 4217): the client TLS context, the handshakes on the
control connection (explicit: after ``AUTH TLS`` / ``234``; implicit: from the first byte)
and the TLS data connections of ``PROT P`` (RETR received through an
:class:`asyncio.BufferedProtocol` into the shared scratch buffer, STOR sent from the file
in :data:`STOR_CHUNK` pieces under the transport's flow control).

The client verifies the server's certificate against the campaign's CA
(``ssl.CERT_REQUIRED``, host name checked against ``Target.tls.server_name``), offers TLS
1.2 and 1.3, and does not reuse the control connection's TLS session on data connections
(asyncio cannot pass a session to a new connection): servers that require reuse must be
configured not to (vsftpd ``require_ssl_reuse=NO``, proftpd ``NoSessionReuseRequired``;
docs/methodology.md, "FTPS").

Each data connection's handshake starts after the transfer command is sent, concurrently
with waiting for the ``150`` reply: servers accept the data connection (and start their
side of the handshake) only once they have the command.

Works under asyncio's loop and uvloop alike (``loop.start_tls``, ``create_connection(sock=,
ssl=)``), checked by tests/runner/load/test_ftps_client.py under both.
"""
from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from functools import lru_cache
from typing import TYPE_CHECKING, BinaryIO

from runner.load.ftp.replies import FTPError, Reply
from runner.load.ftp.retr import _RetrProtocol, scratch_buffer

#: STOR over TLS: bytes read from the file and written per step (the TLS layer copies them
#: into records anyway, so os.sendfile's zero copy is not available without kernel TLS).
STOR_CHUNK = 256 * 1024
#: Write-buffer high-water mark of a STOR data transport (bytes): writing pauses above it.
STOR_HIGH_WATER = 1 << 20


@lru_cache(maxsize=16)
def client_context(ca_file: str) -> ssl.SSLContext:
    """The client-side TLS context of a campaign (cached per CA file): verification
    against ``ca_file`` only (not the system store), host names checked, TLS 1.2 or 1.3,
    an unexpected EOF treated as EOF (byte counts are checked against the file size anyway,
    and some servers close data connections without close_notify).

    Raises:
        OSError / ssl.SSLError: ``ca_file`` cannot be read or holds no certificate.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_verify_locations(cafile=ca_file)
    ctx.options |= getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)
    return ctx


def tls_error(exc: BaseException, what: str) -> FTPError:
    """The FTPError of a failed TLS step: ``tls_verify`` (certificate verify failed:
    unknown CA, wrong name, expired), ``tls_timeout`` (handshake not done in time),
    ``reset`` (connection closed during the handshake), else ``tls_error``."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = getattr(exc, "verify_message", None) or exc
        return FTPError("tls_verify", f"{what}: certificate verify failed: {why}")
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) or (
            isinstance(exc, ConnectionAbortedError) and "taking longer" in str(exc)):  # ssl_handshake_timeout
        return FTPError("tls_timeout", f"{what}: TLS handshake not done in time ({exc})")
    if isinstance(exc, ssl.SSLError):
        return FTPError("tls_error", f"{what}: {getattr(exc, 'reason', None) or exc}")
    if isinstance(exc, (ConnectionError, EOFError)):
        return FTPError("reset", f"{what}: connection closed during the TLS handshake: {exc}")
    if isinstance(exc, OSError):
        return FTPError("tls_error", f"{what}: {exc}")
    return FTPError("protocol", f"{what}: {exc!r}")


class _TlsSendProtocol(asyncio.Protocol):
    """A STOR data connection over TLS: flow control and the end of the connection."""

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.can_write: asyncio.Future | None = None
        self.lost: asyncio.Future = loop.create_future()

    def pause_writing(self) -> None:  # noqa: D102
        self.can_write = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:  # noqa: D102
        if self.can_write is not None and not self.can_write.done():
            self.can_write.set_result(None)
        self.can_write = None

    def connection_lost(self, exc) -> None:  # noqa: D102
        if self.can_write is not None and not self.can_write.done():
            self.can_write.set_result(None)  # the writer then sees is_closing()
        if not self.lost.done():
            self.lost.set_result(exc)


class TlsTransfers:
    """The TLS halves of :class:`runner.load.ftp.session.FTPSession` (a base class of it, as
    :class:`runner.load.ftp.retr.RetrReceivers`): the control-connection handshake and the
    ``PROT P`` data transfers."""

    if TYPE_CHECKING:  # provided by FTPSession
        host: str
        buffer_size: int
        rcvlowat: int
        connect_timeout: float
        tls_context: ssl.SSLContext | None
        server_name: str | None
        handshake_s: float | None
        _data_transports: set[asyncio.Transport]
        _data_socks: set[socket.socket]

        def send(self, line: str) -> None: ...
        async def _final(self, what: str) -> Reply: ...
        async def _preliminary(self, what: str) -> None: ...
        async def _open_raw(self, port: int) -> socket.socket: ...
        def _drop_sock(self, sock: socket.socket) -> None: ...

    async def _handshake_control(self, transport: asyncio.Transport, proto: asyncio.Protocol) -> asyncio.Transport:
        """TLS client handshake on the control connection; returns the TLS transport and
        sets ``handshake_s`` (ClientHello to Finished, s). Raises FTPError (tls kinds)."""
        assert self.tls_context is not None
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()  # uvloop's loop.time() has 1 ms resolution
        try:
            new = await loop.start_tls(transport, proto, self.tls_context, server_hostname=self.server_name,
                                       ssl_handshake_timeout=self.connect_timeout)
        except BaseException as e:
            transport.abort()
            if isinstance(e, asyncio.CancelledError):
                raise
            raise tls_error(e, f"TLS handshake with {self.host}") from e
        self.handshake_s = time.perf_counter() - t0
        if new is None:  # pragma: no cover - start_tls returns None only for a closed transport
            raise FTPError("reset", "control connection closed during the TLS handshake")
        return new

    async def _data_tls(self, sock: socket.socket, proto: asyncio.BaseProtocol, command: str) -> asyncio.Transport:
        """Send ``command`` on the control connection, then run the data connection's TLS
        handshake on ``sock`` while waiting for the ``150``/``125`` reply. Returns the TLS
        data transport (registered for close()). Raises FTPError."""
        loop = asyncio.get_running_loop()
        self.send(command)
        hs = asyncio.ensure_future(loop.create_connection(
            lambda: proto, sock=sock, ssl=self.tls_context, server_hostname=self.server_name,
            ssl_handshake_timeout=self.connect_timeout))
        try:
            await self._preliminary(command)
            transport, _ = await hs
        except BaseException as e:
            hs.cancel()
            if hs.done() and not hs.cancelled() and hs.exception() is None:  # handshake done, reply bad
                hs.result()[0].abort()
            self._drop_sock(sock)
            if isinstance(e, (FTPError, asyncio.CancelledError)):
                raise
            raise tls_error(e, f"{command}: data connection") from e
        self._data_socks.discard(sock)  # the transport owns the socket now (closed with it)
        self._data_transports.add(transport)
        return transport

    async def _retr_tls(self, port: int, path: str) -> int:
        """RETR over a TLS data connection; returns the bytes received before EOF."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        proto = _RetrProtocol(scratch_buffer(self.buffer_size), done)
        sock = await self._open_raw(port)
        # No SO_RCVLOWAT: a server that waits for the client's close_notify before its FIN
        # (vsftpd) would leave a tail below the mark unread, and both sides would wait.
        transport = await self._data_tls(sock, proto, f"RETR {path}")
        try:
            return await proto.received(path)
        finally:
            self._data_transports.discard(transport)
            transport.abort()

    async def _stor_tls(self, port: int, path: str, file: BinaryIO, count: int) -> int:
        """STOR over a TLS data connection: ``count`` bytes of ``file`` from offset 0 in
        :data:`STOR_CHUNK` writes, then close_notify and close, and the final ``226``.
        Returns the bytes written."""
        proto = _TlsSendProtocol()
        sock = await self._open_raw(port)
        transport = await self._data_tls(sock, proto, f"STOR {path}")
        fd = file.fileno()
        sent = 0
        try:
            transport.set_write_buffer_limits(high=STOR_HIGH_WATER)
            while sent < count:
                if proto.can_write is not None:
                    await proto.can_write
                if transport.is_closing():
                    raise ConnectionResetError("data connection closed by the server")
                chunk = os.pread(fd, min(STOR_CHUNK, count - sent), sent)
                if not chunk:
                    break
                transport.write(chunk)
                sent += len(chunk)
            # Flush, send close_notify, and wait for the server's close_notify (asyncio then
            # closes TCP) or for its 226, whichever comes first: a server that answers 226
            # on our close_notify without one of its own is not left waiting for our FIN.
            transport.close()
            final = asyncio.ensure_future(self._final(f"STOR {path}"))
            try:
                await asyncio.wait((proto.lost, final), return_when=asyncio.FIRST_COMPLETED)
                if final.done() or proto.lost.result() is None:
                    await final
                else:
                    raise proto.lost.result()
            finally:
                final.cancel()
        except OSError as e:
            raise FTPError("reset", f"STOR {path}: data connection: {e}") from e
        finally:
            self._data_transports.discard(transport)
            if not transport.is_closing():
                transport.abort()
        return sent


def tls_facts(transport: asyncio.BaseTransport) -> dict[str, str]:
    """``{"protocol": "TLSv1.3", "cipher": "TLS_AES_256_GCM_SHA384", "bits": "256"}`` of a
    TLS transport (``ssl_object.version()`` and ``.cipher()``); {} when it has no TLS."""
    obj = transport.get_extra_info("ssl_object")
    if obj is None:
        return {}
    cipher = obj.cipher() or ("", "", 0)
    return {"protocol": obj.version() or "", "cipher": cipher[0], "bits": str(cipher[2])}
