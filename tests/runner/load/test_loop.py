"""The load generator under both event loops (uvloop, the default, and asyncio's):
every kind of transfer against the real pyftpdlib server, the loop actually in use,
and STOR's own sendfile paths (non-blocking on the loop, blocking on a worker thread) when
the socket buffer fills, at the end of the file and on a timeout."""
from __future__ import annotations

import asyncio
import os
import socket
import time

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.config import get_settings
from runner.load import loop as event_loop
from runner.load.ftp.workloads import run_workload, run_workload_sync


@pytest.mark.parametrize("name", event_loop.EVENT_LOOPS)
@pytest.mark.parametrize("workload", ["stor", "retr", "login", "stor_concurrent", "retr_concurrent"])
def test_workloads_run_on_both_loops(remote_target, name, workload):
    seen: list[str] = []

    async def phase():
        seen.append(type(asyncio.get_running_loop()).__module__.split(".")[0])
        return await run_workload(workload, remote_target,
                                  WorkloadParams(clients=4, file_size=1 << 20, transfer_size=8 << 20,
                                                 duration=0.2, login_mode="concurrent"))

    r = event_loop.run(phase(), wanted=name)
    assert seen == [name]
    assert r.error_count == 0, r.errors
    assert r.ops >= 1
    if workload != "login":
        assert r.bytes >= 1 << 20


def test_the_setting_chooses_the_loop_and_bad_values_are_named(monkeypatch, remote_target):
    monkeypatch.setenv("XFERLAB_EVENT_LOOP", "asyncio")
    get_settings.cache_clear()
    try:
        assert event_loop.loop_name() == "asyncio"
        monkeypatch.setenv("XFERLAB_EVENT_LOOP", "trio")
        get_settings.cache_clear()
        with pytest.raises(ValueError, match="XFERLAB_EVENT_LOOP='trio': want one of uvloop, asyncio"):
            run_workload_sync("login", remote_target, WorkloadParams(clients=1))
    finally:
        monkeypatch.delenv("XFERLAB_EVENT_LOOP")
        get_settings.cache_clear()
    assert event_loop.loop_name() == "uvloop"


SENDERS = {"sendfile": event_loop.sendfile, "sendfile_blocking": event_loop.sendfile_blocking}


@pytest.mark.parametrize("sender", SENDERS)
@pytest.mark.parametrize("name", event_loop.EVENT_LOOPS)
def test_sendfile_waits_for_a_full_socket_buffer(tmp_path, name, sender):
    """8 MiB through a socket pair whose reader drains 64 KiB at a time with pauses:
    os.sendfile meets a full buffer many times (EAGAIN, or a blocked call on the worker
    thread while the loop goes on reading); every byte arrives, in order."""
    data = os.urandom(1 << 20) * 8
    src = tmp_path / "src"
    src.write_bytes(data)
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    a.setblocking(False)
    b.setblocking(False)

    async def main() -> tuple[int, bytes]:
        loop = asyncio.get_running_loop()
        got = bytearray()

        async def reader():
            while len(got) < len(data):
                chunk = await loop.sock_recv(b, 65536)
                if not chunk:
                    break
                got.extend(chunk)
                await asyncio.sleep(0.0005)

        task = asyncio.ensure_future(reader())
        with open(src, "rb") as f:
            sent = await asyncio.wait_for(SENDERS[sender](a, f.fileno(), 0, len(data)), 60)
        await asyncio.wait_for(task, 60)
        return sent, bytes(got)

    try:
        sent, got = event_loop.run(main(), wanted=name)
    finally:
        a.close()
        b.close()
    assert sent == len(data) and got == data
    assert not a.getblocking()  # handed back to the loop as it came


@pytest.mark.parametrize("sender", SENDERS)
def test_sendfile_stops_at_end_of_file(tmp_path, sender):
    src = tmp_path / "short"
    src.write_bytes(b"x" * 1000)
    a, b = socket.socketpair()
    a.setblocking(False)

    async def main() -> int:
        with open(src, "rb") as f:
            return await SENDERS[sender](a, f.fileno(), 100, 5000)

    try:
        assert event_loop.run(main()) == 900
        assert b.recv(2000) == b"x" * 900
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("name", event_loop.EVENT_LOOPS)
def test_a_timeout_unblocks_the_blocking_sender(tmp_path, name):
    """A peer that never reads: the worker thread's sendfile blocks on the full buffer;
    a 0.3 s timeout shuts the socket down, the blocked call returns and TimeoutError
    reaches the caller within 0.3-5 s; the peer then reads end of stream."""
    src = tmp_path / "src"
    src.write_bytes(b"y" * (32 << 20))
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    a.setblocking(False)

    async def main() -> float:
        t0 = time.monotonic()
        with open(src, "rb") as f, pytest.raises(TimeoutError):
            await asyncio.wait_for(event_loop.sendfile_blocking(a, f.fileno(), 0, 32 << 20), 0.3)
        return time.monotonic() - t0

    try:
        took = event_loop.run(main(), wanted=name)
        assert 0.3 <= took < 5.0, took
        b.settimeout(5)
        while b.recv(1 << 20):
            pass
    finally:
        a.close()
        b.close()
