"""xferlab's own HTTP/1.1 load generator: the ``http_upload`` and ``http_download``
workloads (seed 002's gobench: N keep-alive clients, each sending one request after
another for ``duration`` seconds).

Each client holds one connection (an asyncio Protocol: no stream objects, request
heads pre-built, responses read by :class:`runner.load.http_response.ResponseReader`)
and reuses it for all its requests; when the server closes it (``Connection: close``,
a reset), the client connects again and the phase counts a *reconnect*. With
``keepalive: false`` every request has its own connection (``Connection: close``).

Counting (gobench's counters; docs/methodology.md, "HTTP figures"): a request ends
``successful`` (2xx), ``non_2xx`` (any other final status, by status) or
``network_failed`` (connect refused, reset, timeout after ``op_timeout`` s, a malformed
response; the kind goes to ``errors``). At ``duration`` s the phase stops: requests
still in flight are cancelled and counted nowhere (as wrk and gobench do), so
``requests == successful + sum(non_2xx) + network_failed`` always holds.

Upload names: ``PUT /uploads/<prefix>c<client>-<seq>`` where ``prefix`` is random per
phase, so names never repeat within a phase (nor, in practice, across phases);
``POST /uploads/`` lets the server pick the name. Downloads ``GET /<fixture name>``
(runner.load.fixtures.server_name, the RETR fixture's name).
"""
from __future__ import annotations

import asyncio
import os
import secrets
import socket
import time
from collections.abc import Callable

from runner.backends.base import Target
from runner.drivers.result import ClientFigures, PhaseResult
from runner.load.fixtures import server_name, write_fixture
from runner.load.http_response import ResponseError, ResponseReader
from runner.load.phase import gc_paused, raise_nofile_limit
from runner.workloads import WORKLOADS, WorkloadParams

#: Bodies up to this size are sent with one write; larger ones in slices of it, with flow control.
BODY_SLICE = 1 << 20


class _Failed(Exception):
    """A request got no complete response; ``kind`` says why (``refused``, ``reset``,
    ``timeout``, ``protocol``)."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind


class _Conn(asyncio.Protocol):
    """One client connection: writes requests, reads responses, reports each completed
    response to the waiting future."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.reader = ResponseReader()
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.drained: asyncio.Future[None] | None = None
        self.lost = False
        self.nread = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is no asyncio.Transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.nread += len(data)
        w = self.waiter
        try:
            done = self.reader.feed(data)
        except ResponseError as e:
            if w is not None and not w.done():
                w.set_exception(_Failed("protocol", str(e)))
            if self.transport is not None:
                self.transport.abort()
            return
        if done and w is not None and not w.done():
            w.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        w = self.waiter
        if w is not None and not w.done():
            w.set_exception(_Failed("reset", str(exc or "connection closed by the server")))
        d = self.drained
        if d is not None and not d.done():
            d.set_result(None)

    def pause_writing(self) -> None:
        self.drained = self.loop.create_future()

    def resume_writing(self) -> None:
        d = self.drained
        self.drained = None
        if d is not None and not d.done():
            d.set_result(None)


class HttpPhase:
    """Counters of one HTTP phase, shared by its clients (one event loop, no locks)."""

    def __init__(self, workload: str, target: Target, params: WorkloadParams) -> None:
        if target.http_port is None:
            raise ValueError(f"{workload}: the target has no HTTP port (Target.http_port is None)")
        self.workload, self.target, self.p = workload, target, params
        self.port: int = target.http_port
        self.upload = workload == "http_upload"
        host = f"{target.host}:{target.http_port}".encode()
        keep = b"" if params.keepalive else b"Connection: close\r\n"
        self.body = b""
        if self.upload:
            self.body = _payload(params.body_size)
            tail = b" HTTP/1.1\r\nHost: " + host + b"\r\n" + keep + b"Content-Length: " + \
                str(params.body_size).encode() + b"\r\nContent-Type: application/octet-stream\r\n\r\n"
            if params.method == "post":
                self.head_pre, self.head_tail = b"POST /uploads/" + tail, b""
            else:
                self.prefix = secrets.token_hex(4)
                self.head_pre, self.head_tail = f"PUT /uploads/{self.prefix}".encode(), tail
        else:
            self.head_pre = (f"GET /{server_name(params.file_size)}".encode() + b" HTTP/1.1\r\nHost: " + host
                             + b"\r\n" + keep + b"\r\n")
            self.head_tail = b""
        self.requests = self.successful = self.network_failed = self.reconnects = 0
        self.bytes = self.bytes_read = self.bytes_written = 0
        self.non_2xx: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.latencies_ms: list[float] = []
        self.clients: list[ClientFigures] = []

    def fail(self, kind: str) -> None:
        """Count one request that got no complete response, of error ``kind``."""
        self.requests += 1
        self.network_failed += 1
        self.errors[kind] = self.errors.get(kind, 0) + 1

    async def client(self, idx: int, stop_at: float) -> None:
        """One client: requests back to back until ``stop_at`` (perf_counter s); its own
        figures are appended to ``clients`` even when it is cancelled."""
        loop = asyncio.get_running_loop()
        p, t = self.p, self.target
        pre = self.head_pre + (f"c{idx}-".encode() if self.head_tail else b"")
        tail, body, upload = self.head_tail, self.body, self.upload
        big = len(body) > BODY_SLICE
        conn: _Conn | None = None
        ok = seq = mybytes = 0
        clean = True
        t_first = time.perf_counter()
        lat = self.latencies_ms
        perf = time.perf_counter
        try:
            while perf() < stop_at:
                if conn is None or conn.lost:
                    if conn is not None:
                        self.bytes_read += conn.nread
                        self.reconnects += 1
                    try:
                        _, conn = await asyncio.wait_for(
                            loop.create_connection(lambda: _Conn(loop), t.host, self.port), p.op_timeout)
                    except TimeoutError:
                        conn, clean = None, False
                        self.fail("timeout")
                        continue
                    except OSError as e:
                        conn, clean = None, False
                        self.fail("refused" if isinstance(e, ConnectionRefusedError) else "connect")
                        continue
                assert conn is not None
                head = pre + str(seq).encode() + tail if tail else pre
                seq += 1
                w = conn.waiter = loop.create_future()
                tr = conn.transport
                assert tr is not None
                t0 = perf()
                timer = loop.call_later(p.op_timeout, _expire, w)
                try:
                    if big:
                        await self._send_big(conn, head)
                    elif len(body) < 16384:
                        tr.write(head + body)
                    else:
                        tr.write(head)
                        tr.write(body)
                    await w
                except _Failed as e:
                    self.fail(e.kind)
                    self.bytes_written += len(head) + len(body)
                    tr.abort()
                    conn.lost, clean = True, False
                    continue
                finally:
                    timer.cancel()
                lat.append((perf() - t0) * 1000.0)
                r = conn.reader
                self.requests += 1
                self.bytes_written += len(head) + len(body)
                st = r.status
                if 200 <= st < 300:
                    self.successful += 1
                    ok += 1
                    got = len(body) if upload else r.body_bytes
                    self.bytes += got
                    mybytes += got
                else:
                    k = str(st)
                    self.non_2xx[k] = self.non_2xx.get(k, 0) + 1
                    clean = False
                if r.close or not p.keepalive:
                    tr.close()
                    conn.lost = True
                    if not p.keepalive:  # planned: one connection per request
                        self.bytes_read += conn.nread
                        conn = None
                r.reset()
        finally:
            if conn is not None:
                self.bytes_read += conn.nread
                if conn.transport is not None:
                    conn.transport.abort()
            self.clients.append(ClientFigures(bytes=mybytes, seconds=time.perf_counter() - t_first, ok=clean,
                                              requests=ok))

    async def _send_big(self, conn: _Conn, head: bytes) -> None:
        tr = conn.transport
        assert tr is not None
        tr.write(head)
        mv = memoryview(self.body)
        for off in range(0, len(mv), BODY_SLICE):
            if conn.lost:
                raise _Failed("reset", "connection closed while sending the body")
            tr.write(mv[off:off + BODY_SLICE])
            if conn.drained is not None:
                await conn.drained


def _expire(w: asyncio.Future[None]) -> None:
    if not w.done():
        w.set_exception(_Failed("timeout"))


def _payload(size: int) -> bytes:
    """``size`` bytes of random-looking payload (a repeated random 64 KiB block)."""
    blk = os.urandom(min(size, 65536))
    return (blk * (size // len(blk) + 1))[:size]


async def run_http(workload: str, target: Target, params: WorkloadParams,
                   progress: Callable[[str], None] | None = None,
                   checkpoint: Callable[[str], None] | None = None) -> PhaseResult:
    """Run one HTTP phase (module docstring) and return its PhaseResult: ``requests``,
    ``successful`` (also ``ops``), ``network_failed``, ``non_2xx``, ``bytes`` (payload),
    ``bytes_read`` / ``bytes_written`` (wire), ``latencies_ms`` (one per completed
    request), ``clients`` (per-client ``requests``), ``reconnects``, client CPU from
    ``os.times()`` deltas over the phase, ``elapsed_s`` from the first connect to the stop.
    ``checkpoint("loaded")`` (when given) is called half-way through the phase in a worker
    thread, so a slow memory sample does not stall the clients.

    Raises:
        ValueError: ``workload`` is not an HTTP workload, or the target has no HTTP port.
    """
    info = WORKLOADS.get(workload)
    if info is None or info.protocol != "http":
        raise ValueError(f"xferlab-http runs http_upload and http_download, not {workload!r}")
    ph = HttpPhase(workload, target, params)
    say = progress or (lambda _m: None)
    notes: list[str] = []
    if workload == "http_download":
        name = server_name(params.file_size)
        if target.root is not None:
            write_fixture(target.root / name, params.file_size, progress)
        else:
            notes.append(f"fixture {name}: expected in place on the server (no local root)")
    raise_nofile_limit()
    n = params.clients
    say(f"{workload}: {n} clients for {params.duration:g} s against {target.host}:{target.http_port}")
    with gc_paused():
        c0 = os.times()
        t0 = time.perf_counter()
        stop_at = t0 + params.duration
        started = time.time()
        tasks = [asyncio.ensure_future(ph.client(i, stop_at)) for i in range(n)]
        loop = asyncio.get_running_loop()
        marks: list[asyncio.Future[None]] = []
        if checkpoint is not None:
            loop.call_later(params.duration / 2,
                            lambda: marks.append(loop.run_in_executor(None, checkpoint, "loaded")))
        _, pending = await asyncio.wait(tasks, timeout=params.duration)
        elapsed = time.perf_counter() - t0
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        c1 = os.times()
        await asyncio.gather(*marks)
    if ph.upload and params.method == "put":
        notes.append(f"PUT names: /uploads/{ph.prefix}c<client>-<seq>")
    say(f"{ph.successful} successful, {ph.network_failed} network failed, {sum(ph.non_2xx.values())} non-2xx "
        f"in {elapsed:.2f} s")
    return PhaseResult(
        workload=workload, elapsed_s=elapsed, bytes=ph.bytes, ops=ph.successful, latencies_ms=ph.latencies_ms,
        errors=ph.errors, clients=sorted(ph.clients, key=lambda c: -c.requests),
        client_cpu_user_s=c1.user - c0.user, client_cpu_system_s=c1.system - c0.system, notes=notes,
        started_at=started, ended_at=started + elapsed, requests=ph.requests, successful=ph.successful,
        network_failed=ph.network_failed, non_2xx=ph.non_2xx, bytes_read=ph.bytes_read,
        bytes_written=ph.bytes_written, reconnects=ph.reconnects)
