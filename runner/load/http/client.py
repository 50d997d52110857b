"""xferlab's own HTTP/1.1 load generator: the ``http_upload`` and ``http_download``
workloads (seed 002's gobench: N keep-alive clients, each sending one request after
another for ``duration`` seconds).

Each client holds one connection and reuses it for all its requests. The connection is
an asyncio Protocol driven by callbacks: the response is read by
:class:`runner.load.http.response.ResponseReader` in ``data_received``, which counts it
and writes the next request at once (request heads pre-built; no coroutine step, future
or timer per request: one sweeper task per phase fails requests past ``op_timeout``).
When the server closes the connection (``Connection: close``, a reset), the client's
coroutine connects again and the phase counts a *reconnect*. With ``keepalive: false``
every request has its own connection (``Connection: close``).

Counting (gobench's counters; docs/methodology.md, "HTTP figures"): a request ends
``successful`` (2xx), ``non_2xx`` (any other final status, by status) or
``network_failed`` (connect refused, reset, timeout after ``op_timeout`` s, a malformed
response; the kind goes to ``errors``), so ``requests == successful + sum(non_2xx) +
network_failed`` always holds. At ``duration`` s no client sends another request; the
requests in flight finish (as each gobench client completes its last request), bounded
by ``op_timeout``, and ``elapsed_s`` runs until the last one ended: every upload that
reached the server is counted, so a stored-file check can be exact (``unfinished`` = 0).

Upload names: ``PUT /uploads/<prefix>c<client>-<seq>`` where ``prefix`` is random per
phase, so names never repeat within a phase (nor, in practice, across phases);
``POST /uploads/`` lets the server pick the name. Downloads ``GET /<fixture name>``
(runner.load.ftp.fixtures.server_name, the RETR fixture's name).
"""
from __future__ import annotations

import asyncio
import os
import secrets
import socket
import ssl
import time
from collections.abc import Callable

from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.load.base import LoadError
from runner.load.ftp.fixtures import place_http_fixture, server_name
from runner.load.ftp.phase import gc_paused, raise_nofile_limit
from runner.load.ftp.replies import FTPError
from runner.load.ftp.tls import client_context, tls_error, tls_facts
from runner.load.http.response import ResponseError, ResponseReader
from runner.load.result import ClientFigures, PhaseResult
from runner.load.target import Target
from runner.metrics import runqueue

#: Bodies up to this size are sent with one write; larger ones in slices of it, with flow control.
BODY_SLICE = 1 << 20


class _Client:
    """One client's own figures (ClientFigures when the phase ends)."""

    __slots__ = ("idx", "seq", "ok", "bytes", "clean", "t_first")

    def __init__(self, idx: int) -> None:
        self.idx, self.seq, self.ok, self.bytes, self.clean = idx, 0, 0, 0, True
        self.t_first = time.perf_counter()


class _Conn(asyncio.Protocol):
    """One client connection, driven by callbacks (no coroutine step per request): a
    completed response is counted in :meth:`data_received`, which sends the next request
    at once. ``done`` resolves when the connection ended: closed by either side, failed,
    or the phase stopped; the client's coroutine then connects again or returns."""

    def __init__(self, ph: HttpPhase, cl: _Client, loop: asyncio.AbstractEventLoop) -> None:
        self.ph, self.cl = ph, cl
        self.reader = ResponseReader()
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[None] = loop.create_future()
        self.busy = False  # a request is in flight
        self.t0 = self.deadline = 0.0
        self.sent = 0  # bytes of the request in flight
        self.nread = 0
        self.paused = False
        self.body_off = 0
        self.pre = ph.head_pre + (f"c{cl.idx}-".encode() if ph.head_tail else b"")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's TCPTransport is no asyncio.Transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self) -> None:
        """Send the next request, or end the connection when the phase is over."""
        ph, tr = self.ph, self.transport
        if ph.stopped or tr is None or time.perf_counter() >= ph.stop_at:
            self._end()
            return
        cl = self.cl
        if ph.head_tail:
            head = self.pre + str(cl.seq).encode() + ph.head_tail
            cl.seq += 1
        else:
            head = self.pre
        body = ph.body
        self.sent = len(head) + len(body)
        self.busy = True
        self.t0 = t0 = time.perf_counter()
        self.deadline = t0 + ph.p.op_timeout
        if not body:
            tr.write(head)
        elif len(body) < 16384:
            tr.write(head + body)
        else:
            tr.write(head)
            self.body_off = 0
            self._pump()

    def _pump(self) -> None:
        tr, body = self.transport, self.ph.body
        assert tr is not None
        n = len(body)
        if self.body_off == 0 and n <= BODY_SLICE:
            self.body_off = n
            tr.write(body)
            return
        mv = memoryview(body)
        for _ in range(n // BODY_SLICE + 1):  # bounded; stops when the transport asks to pause
            if self.body_off >= n or self.paused:
                break
            tr.write(mv[self.body_off:self.body_off + BODY_SLICE])
            self.body_off += BODY_SLICE

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self.busy and self.body_off < len(self.ph.body):
            self._pump()

    def data_received(self, data: bytes) -> None:
        self.nread += len(data)
        if not self.busy or self.ph.stopped:
            return
        try:
            if not self.reader.feed(data):
                return
        except ResponseError:
            self.fail("protocol")
            return
        ph, r, cl = self.ph, self.reader, self.cl
        self.busy = False
        ph.latencies_ms.append((time.perf_counter() - self.t0) * 1000.0)
        ph.requests += 1
        ph.bytes_written += self.sent
        st = r.status
        if 200 <= st < 300:
            ph.successful += 1
            cl.ok += 1
            got = len(ph.body) if ph.upload else r.body_bytes
            ph.bytes += got
            cl.bytes += got
        else:
            k = str(st)
            ph.non_2xx[k] = ph.non_2xx.get(k, 0) + 1
            cl.clean = False
        # an answer before the whole body was sent (e.g. an early 413): the connection cannot carry another request
        close = r.close or not ph.p.keepalive or (len(ph.body) >= 16384 and self.body_off < len(ph.body))
        r.reset()
        if close:
            self._end()
        else:
            self.send()

    def fail(self, kind: str) -> None:
        """Count the request in flight as network failed (``kind``) and drop the connection."""
        if self.busy and not self.ph.stopped:
            self.busy = False
            self.ph.fail(kind)
            self.ph.bytes_written += self.sent
            self.cl.clean = False
        if self.transport is not None:
            self.transport.abort()
        self._end()

    def _end(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        if not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.busy:
            self.fail("reset")
        self._end()


class HttpPhase:
    """Counters of one HTTP phase, shared by its clients (one event loop, no locks)."""

    def __init__(self, workload: str, target: Target, params: WorkloadParams) -> None:
        if target.http_port is None:
            raise ValueError(f"{workload}: the target has no HTTP port (Target.http_port is None)")
        self.workload, self.target, self.p = workload, target, params
        self.port: int = target.http_port
        self.upload = workload == "http_upload"
        self.stop_at = 0.0
        self.stopped = False
        self.conns: set[_Conn] = set()
        host = f"{target.host}:{target.http_port}".encode()
        keep = b"" if params.keepalive else b"Connection: close\r\n"
        self.body = b""
        self.prefix = ""
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
        tls = target.tls if target.tls is not None and target.tls.mode == "https" else None
        self.tls_context = client_context(tls.ca_file) if tls is not None else None
        self.server_name = tls.server_name if tls is not None else None
        self.handshakes_ms: list[float] = []  # HTTPS: each connection's TLS handshake
        self.tls: dict[str, str] = {"mode": "https", "key_type": tls.key_type} if tls is not None else {}

    async def connect(self, proto: _Conn) -> asyncio.BaseTransport:
        """Open one connection for ``proto``; with HTTPS, the TLS handshake after the TCP
        connect (timed into ``handshakes_ms``, verified against the campaign's CA). Raises
        OSError (ssl.SSLError included) or TimeoutError."""
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_connection(lambda: proto, self.target.host, self.port)
        if self.tls_context is None:
            return transport
        t0 = time.perf_counter()
        try:
            new = await loop.start_tls(transport, proto, self.tls_context, server_hostname=self.server_name,
                                       ssl_handshake_timeout=self.p.op_timeout)
        except BaseException:
            transport.abort()
            raise
        if new is None:  # start_tls gives None only for a transport closed under it
            raise ConnectionResetError("connection closed during the TLS handshake")
        self.handshakes_ms.append((time.perf_counter() - t0) * 1000.0)
        proto.transport = new
        if len(self.tls) == 2:
            self.tls.update(tls_facts(new))
        return new

    def fail(self, kind: str) -> None:
        """Count one request that got no complete response, of error ``kind``."""
        self.requests += 1
        self.network_failed += 1
        self.errors[kind] = self.errors.get(kind, 0) + 1

    async def client(self, idx: int) -> None:
        """One client: a connection driven by callbacks (:class:`_Conn`), opened again
        when it ends before ``stop_at``; its figures are appended to ``clients`` even when
        it is cancelled."""
        loop = asyncio.get_running_loop()
        cl = _Client(idx)
        p = self.p
        conn: _Conn | None = None
        try:
            for _ in range(1 << 40):  # bounded by stop_at: every turn is one connection or one failure
                if self.stopped or time.perf_counter() >= self.stop_at:
                    break
                conn = _Conn(self, cl, loop)
                try:
                    await asyncio.wait_for(self.connect(conn), p.op_timeout)
                except TimeoutError:
                    cl.clean = False
                    conn = None
                    self.fail("timeout")
                    continue
                except OSError as e:
                    cl.clean = False
                    conn = None
                    self.fail(tls_error(e, "connect").kind if isinstance(e, ssl.SSLError) else
                              "refused" if isinstance(e, ConnectionRefusedError) else "connect")
                    continue
                assert conn is not None
                self.conns.add(conn)
                conn.send()
                await conn.done
                self.conns.discard(conn)
                self.bytes_read += conn.nread
                if p.keepalive and not self.stopped and time.perf_counter() < self.stop_at:
                    self.reconnects += 1
                conn = None
        finally:
            if conn is not None:
                self.conns.discard(conn)
                self.bytes_read += conn.nread
                if conn.transport is not None:
                    conn.transport.abort()
            self.clients.append(ClientFigures(bytes=cl.bytes, seconds=time.perf_counter() - cl.t_first,
                                              ok=cl.clean, requests=cl.ok))

    async def sweep(self) -> None:
        """Fail requests in flight for longer than ``op_timeout`` (kind ``timeout``), checked
        every ``min(op_timeout / 4, 0.25)`` s: one timer for the phase, not one per request."""
        every = min(self.p.op_timeout / 4, 0.25)
        for _ in range(1 << 40):  # bounded: cancelled when the phase ends
            await asyncio.sleep(every)
            now = time.perf_counter()
            for c in [c for c in self.conns if c.busy and c.deadline < now]:
                c.fail("timeout")


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
    ``os.times()`` deltas over the phase and its run-queue wait (runner.metrics.runqueue),
    ``elapsed_s`` from the first connect to the stop.
    ``checkpoint("loaded")`` (when given) is called half-way through the phase in a worker
    thread, so a slow memory sample does not stall the clients.

    Raises:
        ValueError: ``workload`` is not an HTTP workload, or the target has no HTTP port.
        LoadError: the download fixture cannot be placed (runner.load.ftp.fixtures.place_http_fixture).
    """
    info = WORKLOADS.get(workload)
    if info is None or info.protocol != "http":
        raise ValueError(f"xferlab-http runs http_upload and http_download, not {workload!r}")
    ph = HttpPhase(workload, target, params)
    say = progress or (lambda _m: None)
    notes: list[str] = []
    if workload == "http_download":
        try:
            _name, note = await place_http_fixture(target, params.file_size, progress)
        except (OSError, FTPError) as e:
            raise LoadError(f"{workload}: download fixture not placed on the server: {e}") from e
        if note:
            notes.append(note)
    raise_nofile_limit()
    n = params.clients
    say(f"{workload}: {n} clients for {params.duration:g} s against {target.host}:{target.http_port}")
    with gc_paused():
        rq0 = runqueue.thread_waits()
        cpu_set = os.sched_getaffinity(0)
        steal0 = runqueue.cpu_steal_s(cpu_set)
        c0 = os.times()
        t0 = time.perf_counter()
        stop_at = t0 + params.duration
        started = time.time()
        ph.stop_at = stop_at
        tasks = [asyncio.ensure_future(ph.client(i)) for i in range(n)]
        sweeper = asyncio.ensure_future(ph.sweep())
        loop = asyncio.get_running_loop()
        marks: list[asyncio.Future[None]] = []
        if checkpoint is not None:
            loop.call_later(params.duration / 2,
                            lambda: marks.append(loop.run_in_executor(None, checkpoint, "loaded")))
        # at stop_at no client sends another request; those in flight finish (as gobench's clients
        # do), bounded by op_timeout through the sweeper, so every upload that reached the server counts
        _, pending = await asyncio.wait(tasks, timeout=params.duration + params.op_timeout + 1.0)
        elapsed = time.perf_counter() - t0
        ph.stopped = True  # responses from now on are counted nowhere
        unfinished = sum(1 for c in ph.conns if c.busy)
        for task in (*pending, sweeper):
            task.cancel()
        for c in list(ph.conns):
            c._end()
        await asyncio.gather(*tasks, sweeper, return_exceptions=True)
        c1 = os.times()
        rq_wait = runqueue.waited_s(rq0, runqueue.thread_waits())
        steal = runqueue.steal_share(steal0, runqueue.cpu_steal_s(cpu_set), time.perf_counter() - t0, len(cpu_set))
        await asyncio.gather(*marks)
    if ph.upload and params.method == "put":
        notes.append(f"PUT names: /uploads/{ph.prefix}c<client>-<seq>")
    say(f"{ph.successful} successful, {ph.network_failed} network failed, {sum(ph.non_2xx.values())} non-2xx "
        f"in {elapsed:.2f} s")
    return PhaseResult(
        workload=workload, elapsed_s=elapsed, bytes=ph.bytes, ops=ph.successful, latencies_ms=ph.latencies_ms,
        errors=ph.errors, clients=sorted(ph.clients, key=lambda c: -c.requests),
        client_cpu_user_s=c1.user - c0.user, client_cpu_system_s=c1.system - c0.system,
        client_runqueue_wait_s=rq_wait, client_steal_share=steal, notes=notes, started_at=started,
        ended_at=started + elapsed,
        requests=ph.requests, successful=ph.successful,
        network_failed=ph.network_failed, non_2xx=ph.non_2xx, bytes_read=ph.bytes_read,
        bytes_written=ph.bytes_written, reconnects=ph.reconnects, unfinished=unfinished,
        tls_handshake_ms=ph.handshakes_ms, tls=ph.tls)
