"""An independent reference for TLS handshake times: the standard library's blocking
``ssl`` client, timed around ``do_handshake()`` on the same server the lab measures.

The lab's clients (asyncio transports) and this one run the same key exchange and verify
the same certificate chain, so the lab's handshakes are bounded by these:

* below by a quarter of the fastest reference handshake (the same crypto cannot take a
  quarter as long; the factor 4 covers a machine whose load changes between the
  measurements: take the reference before and after the lab's phase);
* above by ``concurrent`` x (the slowest reference handshake + 20 ms): a phase that
  shakes hands on ``concurrent`` connections at once makes each wait, at worst, for all
  of them at a server that completes one at a time, each as slow as the slowest
  reference plus 20 ms of the event loop's turns and of waiting for a CPU (a forking
  server starts its TLS per session);
* and above that, for a server whose listener pauses after a session ends, by up to two
  such pauses: proftpd's master sleeps ``PR_TUNABLE_EINTR_RETRY_INTERVAL`` (0.2 s,
  proftpd 1.3.8 ``include/options.h``) in ``pr_signals_handle()`` whenever a system call
  was interrupted, and the SIGCHLD of every session process that exits interrupts its
  ``select()``: a connection that arrives then waits in the listen queue until the
  master wakes (strace of the master: ``SIGCHLD``, then ``pselect6(0, NULL, NULL, NULL,
  {0, 200000000})``). An implicit-FTPS handshake starts at connect, so it holds that wait;
  a reference handshake met it once (201 ms), a lab one twice (424 ms).
"""
from __future__ import annotations

import socket
import ssl
import time

from runner.load.target import Target

#: Sequential reference handshakes measured per call.
ROUNDS = 5
#: How long a server's listener stops accepting after one of its session processes exits,
#: ms (module docstring); servers not named: 0.
ACCEPT_PAUSE_MS = {"proftpd": 200.0}


def _reply(sock: socket.socket, limit: int = 1 << 16) -> bytes:
    """One whole FTP reply (multi-line ``NNN-`` ... ``NNN `` too), at most ``limit`` bytes;
    its last line is returned."""
    buf = b""
    line = b""
    while len(buf) < limit:
        chunk = sock.recv(1)
        if not chunk:
            return line
        buf += chunk
        if buf.endswith(b"\r\n"):
            line, buf = buf, b""
            if len(line) >= 4 and line[:3].isdigit() and line[3:4] == b" ":
                return line
    return line


def reference_handshakes_ms(t: Target, rounds: int = ROUNDS) -> list[float]:
    """``rounds`` sequential TLS handshakes with ``t`` (``t.tls.mode``: ``explicit`` after
    the greeting and ``AUTH TLS``; ``implicit`` and ``https`` from the first byte), each
    verified against ``t.tls.ca_file`` for ``t.tls.server_name``; ms per handshake.
    Raises AssertionError on a refused AUTH TLS, ssl.SSLError on a failed handshake."""
    assert t.tls is not None
    ctx = ssl.create_default_context(cafile=t.tls.ca_file)
    port = t.http_port if t.tls.mode == "https" else t.port
    out: list[float] = []
    for _ in range(rounds):
        with socket.create_connection((t.host, port), timeout=10) as raw:
            if t.tls.mode == "explicit":
                assert _reply(raw).startswith(b"220"), "no FTP greeting"
                raw.sendall(b"AUTH TLS\r\n")
                assert _reply(raw).startswith(b"234"), "AUTH TLS refused"
            with ctx.wrap_socket(raw, server_hostname=t.tls.server_name, do_handshake_on_connect=False) as s:
                t0 = time.perf_counter()
                s.do_handshake()
                out.append((time.perf_counter() - t0) * 1000.0)
    return out


def assert_handshakes_within(lab_ms: list[float], reference_ms: list[float], concurrent: int,
                             server: str = "") -> None:
    """Each of the lab's handshakes within the module docstring's bounds of the reference
    (``server``: its listener's pause after a session ends, :data:`ACCEPT_PAUSE_MS`)."""
    lo = min(reference_ms) / 4
    hi = concurrent * (max(reference_ms) + 20.0) + 2 * ACCEPT_PAUSE_MS.get(server, 0.0)
    bad = [x for x in lab_ms if not lo <= x <= hi]
    assert not bad, f"handshakes {sorted(lab_ms)} ms outside [{lo:.3f}, {hi:.1f}] (reference {sorted(reference_ms)})"
