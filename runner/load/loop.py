"""The load generator's event loop: uvloop (default) or asyncio's own, and the parts of
the client that must not depend on which one runs.

uvloop (libuv under a CPython extension, a well-kept drop-in replacement of the asyncio
event loop) spends less CPU per wake-up and per socket operation than asyncio's
selector loop, so the load generator needs less of its core per login and per GiB
(figures: ``xferlab selftest``, docs/methodology.md "Client cost"). Chosen by
``XFERLAB_EVENT_LOOP`` (``uvloop`` or ``asyncio``); when uvloop is not installed the
asyncio loop is used and :func:`loop_name` says so.

uvloop does not implement ``loop.sock_sendfile`` (it raises NotImplementedError even
with ``fallback=False``), so STOR sends with :func:`sendfile`: ``os.sendfile`` on the
non-blocking data socket, waiting for writability with ``loop.add_writer`` when the
socket buffer is full. It is what asyncio's own ``_sock_sendfile_native`` does, and the
same code runs under both loops. A single-stream STOR (one upload at a time) sends with
:func:`sendfile_blocking` instead: blocking ``os.sendfile`` on a worker thread, as the C
uploader of ``runner/selftest/netlimit.c`` and curl send. On loopback to tpd (2 cores,
256 MiB uploads, medians of 6 interleaved rounds) the non-blocking pattern read 1,390-1,520
MiB/s where blocking sendfile read 1,580-1,660 and the C uploader 1,610: woken 100-150
times per upload, the sender refills the socket in bursts and the receiver's reads come
in smaller pieces, while the client's CPU stays under 35% busy either way.
"""
from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

#: Event loops the load generator can run on, the default first.
EVENT_LOOPS = ("uvloop", "asyncio")


def _wanted() -> str:
    from runner.config import get_settings

    name = get_settings().event_loop
    if name not in EVENT_LOOPS:
        raise ValueError(f"XFERLAB_EVENT_LOOP={name!r}: want one of {', '.join(EVENT_LOOPS)}")
    return name


def loop_name(wanted: str | None = None) -> str:
    """The event loop a phase runs on: ``wanted`` (default: the setting) when it can
    be used here, else ``"asyncio"`` (uvloop not installed).

    Raises:
        ValueError: ``wanted`` (or the setting) is not one of :data:`EVENT_LOOPS`.
    """
    name = wanted or _wanted()
    if name not in EVENT_LOOPS:
        raise ValueError(f"event loop {name!r}: want one of {', '.join(EVENT_LOOPS)}")
    if name == "uvloop":
        try:
            import uvloop  # noqa: F401
        except ImportError:
            return "asyncio"
    return name


def loop_factory(wanted: str | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    """A callable making a new event loop of :func:`loop_name` ``(wanted)``."""
    if loop_name(wanted) == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def run_at(netns: str | None, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``make()`` with :func:`run`, inside the network namespace
    ``netns`` when given (a thread that joined it: runner.net.netns.call_in_netns),
    as a target with ``Target.netns`` must be reached. Returns its result.

    Raises:
        NetnsError: ``netns`` cannot be joined; else whatever the coroutine raises.
    """
    if not netns:
        return run(make())
    from runner.net.netns import call_in_netns

    return call_in_netns(netns, lambda: run(make()))


def run(coro: Coroutine[Any, Any, T], *, wanted: str | None = None) -> T:
    """Run ``coro`` to completion on a new event loop of :func:`loop_name` ``(wanted)``
    (``asyncio.Runner``: the loop is closed and its async generators finalised after),
    return its result or raise its exception. Must not be called from a running loop.

    Raises:
        ValueError: as :func:`loop_name` (``coro`` is closed, never started).
    """
    try:
        factory = loop_factory(wanted)
    except BaseException:
        coro.close()
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


async def sendfile(sock: socket.socket, fd: int, offset: int, count: int) -> int:
    """Send ``count`` bytes of the file ``fd`` from ``offset`` on the non-blocking
    ``sock`` with ``os.sendfile`` (zero-copy), under any event loop.

    Returns the bytes sent: ``count``, or fewer when the file ended first.

    Raises:
        OSError: the connection failed (reset, broken pipe); the bytes sent before
            are lost to the caller, as with ``loop.sock_sendfile``.
    """
    loop = asyncio.get_running_loop()
    sent = 0
    out = sock.fileno()
    while sent < count:
        try:
            n = os.sendfile(out, fd, offset + sent, count - sent)
        except (BlockingIOError, InterruptedError):
            fut: asyncio.Future[None] = loop.create_future()
            loop.add_writer(out, _wake, fut)
            try:
                await fut
            finally:
                loop.remove_writer(out)
            continue
        if n == 0:  # end of file
            break
        sent += n
    return sent


async def start_worker_thread() -> None:
    """Start the running loop's default executor and its first worker thread (the thread
    :func:`sendfile_blocking` runs on), outside a measured span. The first
    ``asyncio.to_thread`` of a process imports ``concurrent.futures.thread``, reads the CPU
    count and clones a thread: under strace that took 9.5 ms between a STOR's ``150``
    reply and its ``sendfile``, inside the transfer's span. Idempotent (later calls reuse
    the thread)."""
    await asyncio.to_thread(int)


async def sendfile_blocking(sock: socket.socket, fd: int, offset: int, count: int) -> int:
    """Send ``count`` bytes of the file ``fd`` from ``offset`` on ``sock`` with blocking
    ``os.sendfile`` calls on a worker thread (``asyncio.to_thread``), the socket switched
    to blocking mode for the transfer. For one transfer at a time (a thread each); many
    concurrent transfers use :func:`sendfile`.

    Returns the bytes sent: ``count``, or fewer when the file ended first. When the
    awaiting task is cancelled (a timeout), the socket is shut down so that the thread's
    blocked call returns, and CancelledError propagates.

    Raises:
        OSError: the connection failed (reset, broken pipe).
    """
    out = sock.fileno()

    def send() -> int:
        sent = 0
        while sent < count:
            try:
                n = os.sendfile(out, fd, offset + sent, count - sent)
            except InterruptedError:
                continue
            if n == 0:  # end of file
                break
            sent += n
        return sent

    sock.setblocking(True)
    try:
        return await asyncio.to_thread(send)
    except asyncio.CancelledError:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise
    finally:
        sock.setblocking(False)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
