"""Free TCP ports on 127.0.0.1 for the tests: for a server a test starts, for the passive
range of an FTP server, or for a port where nothing listens (a refused connection).

The ports are drawn at random below the kernel's ephemeral range
(``net.ipv4.ip_local_port_range``). The kernel picks the local port of every connect()
and of every bind to port 0 from that range, so none of them can take a port below it
between this check and the server's bind (only a program binding that very port could).
A port found free by binding port 0 and closing it again is in that range: on a host
busy with loopback load tests (tens of thousands of ports in TIME_WAIT) the kernel may
hand it out again at once.
"""
from __future__ import annotations

import random
import socket

#: How many random ports :func:`free_ports` tries at most.
TRIES = 400
#: The lowest port drawn.
LOW = 10000


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 when it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def is_free(port: int) -> bool:
    """Whether nothing is bound to TCP ``port`` of 127.0.0.1 now: it binds with
    SO_REUSEADDR, as the lab's servers do (a port in TIME_WAIT counts as free)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports of 127.0.0.1 that nothing is bound to now.

    Each is checked by binding it with SO_REUSEADDR (as the lab's servers bind), and all
    are held at once so none repeats; all are released before returning.

    Raises:
        RuntimeError: :data:`TRIES` random ports gave fewer than ``n``.
    """
    eph_lo = _ephemeral_low()
    rnd = random.Random()
    socks: list[socket.socket] = []
    try:
        for _ in range(TRIES):
            if len(socks) == n:
                break
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", rnd.randrange(LOW, max(eph_lo, LOW + 1))))
                socks.append(s)
            except OSError:
                s.close()
        if len(socks) < n:
            raise RuntimeError(f"found {len(socks)} of {n} free ports below {eph_lo}")
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    """One TCP port of 127.0.0.1 that nothing is bound to now (see :func:`free_ports`)."""
    return free_ports(1)[0]


def free_range(width: int, tries: int = 40) -> range:
    """``width`` consecutive TCP ports of 127.0.0.1, all free now (:func:`is_free`), below
    the ephemeral range: for an FTP server's passive range.

    Raises:
        RuntimeError: ``tries`` random ranges all had a port in use, or the range does
            not fit between :data:`LOW` and the ephemeral range.
    """
    eph_lo = _ephemeral_low()
    if LOW + width > eph_lo:
        raise RuntimeError(f"{width} ports do not fit between {LOW} and {eph_lo}")
    rnd = random.Random()
    for _ in range(tries):
        lo = rnd.randrange(LOW, eph_lo - width + 1)
        if all(is_free(p) for p in range(lo, lo + width)):
            return range(lo, lo + width)
    raise RuntimeError(f"no {width} free consecutive ports below {eph_lo} in {tries} tries")
