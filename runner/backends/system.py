"""Host facts both backends need: the open-files ceiling and a free TCP port."""
from __future__ import annotations

import socket
from pathlib import Path

#: Upper bound xferlab asks for RLIMIT_NOFILE (seed 000 raised the limit for 2,000+ clients).
NOFILE_CAP = 1048576


def nr_open() -> int:
    """The kernel's ceiling for RLIMIT_NOFILE (``/proc/sys/fs/nr_open``); 1048576 (the
    kernel default) when it cannot be read."""
    try:
        return int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        return NOFILE_CAP


def nofile_target() -> int:
    """The RLIMIT_NOFILE a server is given: ``min(fs.nr_open, 1048576)``."""
    return min(nr_open(), NOFILE_CAP)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` (an IPv4 address) right now: bind to port 0 and release.
    Racy by nature: the local backend retries once with another port if the server
    reports it in use. Raises OSError when ``host`` is not an address of this machine."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
