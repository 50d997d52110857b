"""The four ways RETR payload is received (``FTPSession.retr_mode``): ``"reader"`` (raw
non-blocking socket, ``loop.add_reader`` callback draining up to :data:`_DRAIN`
``recv_into`` per wake-up into one shared preallocated buffer, :func:`scratch_buffer`),
``"splice"`` (the same callback, but splice(2) socket -> pipe -> /dev/null: the pages
are handed over and dropped, never copied to user space), ``"protocol"``
(:class:`asyncio.BufferedProtocol`) and ``"recv_into"`` (``await loop.sock_recv_into``).
The payload is counted, never kept. Measured against each other by
benchmarks/loadgen_selftest.py."""
from __future__ import annotations

import asyncio
import fcntl
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from runner.load.ftp.replies import FTPError, classify


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

    async def received(self, path: str) -> int:
        """The bytes received once the data connection of ``RETR path`` has closed.
        Raises FTPError(kind="reset") when it broke (OSError)."""
        try:
            await self.done
        except OSError as e:
            raise FTPError("reset", f"RETR {path}: data connection: {e}") from e
        return self.nbytes


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


RetrMode = Literal["protocol", "recv_into", "reader", "splice"]
#: The mode sessions use unless told: "splice" where the platform has splice(2).
DEFAULT_RETR_MODE: RetrMode = "splice" if hasattr(os, "splice") else "reader"
#: Most recv_into / splice calls per readiness callback (fairness bound).
_DRAIN = 8




#: Smallest splice pipe (bytes): a pipe-full moves per splice call, and SO_RCVLOWAT is
#: half of it, so a wake-up finds at least 512 KiB queued. Measured on loopback against
#: pyftpdlib (5 interleaved rounds): 256 KiB pipe / 128 KiB low-water mark 0.288 s/GiB of
#: client CPU, 1 MiB / 512 KiB 0.137 s/GiB (the receiver by recv_into: 0.830).
SPLICE_PIPE = 1 << 20
#: fcntl(2) F_SETPIPE_SZ (Linux 2.6.35+; Python's fcntl has it from 3.10).
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)


class _SpliceSink:
    """A pipe into which RETR payload is spliced from the socket and out of which it is
    spliced to /dev/null (splice(2)): the payload's pages change hands and are dropped,
    never copied into this process. One per process, shared like :func:`scratch_buffer`
    (each splice pair completes synchronously on the event-loop thread, so the pipe is
    empty between callbacks)."""

    def __init__(self, size: int) -> None:
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            with open("/proc/sys/fs/pipe-max-size") as f:
                max_size = int(f.read())
        except (OSError, ValueError):
            max_size = 1 << 20
        self.size = fcntl.fcntl(self.w, F_SETPIPE_SZ, max(4096, min(size, max_size)))
        self.null = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)

    def drain(self, n: int) -> None:
        """Move ``n`` bytes from the pipe to /dev/null."""
        while n > 0:
            n -= os.splice(self.r, self.null, n)


_SINKS: dict[int, _SpliceSink] = {}


def splice_sink(size: int) -> _SpliceSink:
    """The process-wide splice pipe of (at least asked) ``size`` bytes."""
    sink = _SINKS.get(size)
    if sink is None:
        sink = _SINKS[size] = _SpliceSink(size)
    return sink


class RetrReceivers:
    """The RETR receive loops of :class:`runner.load.ftp.session.FTPSession` (a base class of it:
    they use its control connection and its data-socket bookkeeping). Each returns the
    bytes received before the data connection closed; FTPError(kind="reset") when it
    broke, or the kind of a failed data connect."""

    if TYPE_CHECKING:  # provided by FTPSession
        host: str
        buffer_size: int
        rcvlowat: int
        _data_transports: set[asyncio.Transport]

        def send(self, line: str) -> None: ...
        async def _preliminary(self, what: str) -> None: ...
        async def _open_raw(self, port: int) -> socket.socket: ...
        def _drop_sock(self, sock: socket.socket) -> None: ...

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
            return await proto.received(path)
        finally:
            self._data_transports.discard(transport)
            transport.abort()

    async def _retr_reader(self, port: int, path: str) -> int:
        sock = await self._open_raw(port)
        if self.rcvlowat:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, self.rcvlowat)
        buf = scratch_buffer(self.buffer_size)
        recv_into = sock.recv_into
        return await self._retr_drained(sock, path, lambda: recv_into(buf))

    async def _retr_splice(self, port: int, path: str) -> int:
        """As :meth:`_retr_reader`, but each wake-up splices up to :data:`_DRAIN` pipe-fulls
        socket -> pipe -> /dev/null (:class:`_SpliceSink`, at least :data:`SPLICE_PIPE`,
        capped by ``/proc/sys/fs/pipe-max-size``) instead of ``recv_into``: the bytes are
        counted without being copied to user space."""
        sock = await self._open_raw(port)
        sink = splice_sink(max(self.buffer_size, SPLICE_PIPE))
        if self.rcvlowat:  # at least half a pipe-full (0: the kernel's default, 1 byte)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, max(self.rcvlowat, sink.size // 2))
        fd = sock.fileno()
        splice, w, chunk, drain = os.splice, sink.w, sink.size, sink.drain
        flags = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK

        def take() -> int:
            k = splice(fd, w, chunk, flags=flags)
            if k:
                drain(k)
            return k

        return await self._retr_drained(sock, path, take)

    async def _retr_drained(self, sock: socket.socket, path: str, take: Callable[[], int]) -> int:
        """Send ``RETR path`` and drain the non-blocking data socket ``sock`` from a
        ``loop.add_reader`` callback: up to :data:`_DRAIN` ``take()`` calls per wake-up,
        each consuming one chunk and returning its size (0 at end of file; BlockingIOError
        when nothing is queued). Returns the bytes taken; closes ``sock``. Raises
        FTPError(kind="reset") when the data connection broke."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        count = [0]
        fd = sock.fileno()

        def readable() -> None:
            n = 0
            try:
                for _ in range(_DRAIN):
                    k = take()
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
