"""Running the load generator inside a server's network namespace.

The docker backend's default network mode (``netns``) keeps each server in its own
container network namespace (per-container sysctls, counters of its own traffic only)
and has the load generator *join* that namespace to connect: the client's sockets are
created in the server's namespace and reach the server over that namespace's loopback,
exactly as a local server is reached over the host's loopback. Nothing on the measured
path crosses the veth pair, Docker's bridge or its netfilter rules (the cost of the
``bridge`` mode: docs/methodology.md, "The cost of containers").

Network namespaces are per thread on Linux (``setns(2)`` with ``CLONE_NEWNET`` changes
the calling thread only, and a socket keeps the namespace it was created in), so
:func:`call_in_netns` runs a callable in a new thread that has joined the namespace;
the rest of the process (sampler, store, dashboard) stays where it was.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: ``CLONE_NEWNET`` from <sched.h>: the namespace type given to setns(2).
CLONE_NEWNET = 0x40000000


class NetnsError(OSError):
    """A network namespace cannot be joined; the message names the path and why
    (no such process, or no CAP_SYS_ADMIN: setns(2) requires it)."""


def _setns(fd: int) -> None:
    if hasattr(os, "setns"):  # Python 3.12+
        os.setns(fd, CLONE_NEWNET)
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _join(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise NetnsError(e.errno, f"network namespace {path}: {e.strerror}") from None
    try:
        _setns(fd)
    except OSError as e:
        hint = " (setns needs CAP_SYS_ADMIN: run as root, or use network: bridge)" if e.errno == 1 else ""
        raise NetnsError(e.errno, f"cannot join network namespace {path}: {e.strerror}{hint}") from None
    finally:
        os.close(fd)


def call_in_netns(path: str, fn: Callable[[], T]) -> T:
    """Call ``fn()`` in a new thread that first joined the network namespace ``path``
    (``/proc/<pid>/ns/net`` of a server), wait for it and return its result.

    Everything ``fn`` creates in that thread (sockets, an asyncio event loop and its
    connections) lives in that namespace. The thread inherits this thread's CPU
    affinity (the load generator's pinning holds).

    Args:
        path: a network namespace file, e.g. ``"/proc/1234/ns/net"``.
        fn: the work; its exceptions are re-raised here unchanged.

    Raises:
        NetnsError: the namespace cannot be opened (process gone) or joined (no
            CAP_SYS_ADMIN); ``fn`` did not run.
    """
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            _join(path)
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    t = threading.Thread(target=body, name=f"xferlab-netns:{path}", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def can_join_netns() -> str | None:
    """None when this process may join another network namespace, else the reason.

    Tested by joining this process's own namespace from a scratch thread (same
    permission check as any other: CAP_SYS_ADMIN), so nothing changes."""
    try:
        call_in_netns("/proc/self/ns/net", lambda: None)
    except NetnsError as e:
        return str(e)
    return None
