"""Driver ``curl``: FTP downloads and uploads made by curl processes (Debian package
``curl``).

Each client runs ``curl -q -sS --user USER:PASSWORD [--disable-epsv] [OPTIONS] -o
/dev/null -w '%{size_download}' ftp://HOST:PORT/NAME`` (upload: ``-T SOURCE -w
'%{size_upload}'``); the number it prints is its byte count. ``passive: pasv`` adds
``--disable-epsv``; ``epsv`` is curl's default (EPSV first, PASV if the server refuses
it). ``client_options``: the options of :data:`OPTIONS` (``{"--tcp-nodelay": ""}``),
each value typed (runner.load.tools.options) and passed in its canonical form.
The curl tool has no receive-buffer option (libcurl's ``CURLOPT_BUFFERSIZE`` is not on
its command line, and ``--limit-rate`` limits the rate); ``--no-buffer`` only stops it
buffering its output. Shared behaviour: runner.load.tools.ftp_tool.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from runner.load.tools.ftp_tool import UPLOADS, FtpClientDriver, count_from
from runner.load.tools.options import (
    FLAG,
    IP_OR_INTERFACE,
    Option,
    choice,
    flag_argv,
    integer,
    option_error,
    port_range,
    seconds,
    table,
)
from runner.load.tools.spawn import ClientRun
from runner.load.tools.wget import ftp_url

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.target import Target

#: curl options ``client_options`` may give, typed.
OPTIONS: dict[str, Option] = table(
    Option("--tcp-nodelay", FLAG, "TCP_NODELAY on the sockets (curl's default since 7.50.2)"),
    Option("--tcp-fastopen", FLAG, "TCP Fast Open on connect"),
    Option("--no-keepalive", FLAG, "no TCP keepalive probes"),
    Option("--keepalive-time", integer(1, 86400), "seconds idle before TCP keepalive probes"),
    Option("--ftp-method", choice("multicwd", "nocwd", "singlecwd"), "how curl reaches the file's folder"),
    Option("--ftp-skip-pasv-ip", FLAG, "connect the data channel to the control address, not PASV's"),
    Option("--ftp-pret", FLAG, "send PRET before PASV"),
    Option("--local-port", port_range(), "local port (or range) of the connections"),
    Option("--interface", IP_OR_INTERFACE, "the local interface or address to connect from"),
    Option("--no-buffer", FLAG, "do not buffer curl's output"),
    Option("--ipv4", FLAG, "resolve names to IPv4 addresses only"),
    Option("--connect-timeout", seconds(0.001, 3600), "most seconds for the connection to be made"),
)
_COUNT = re.compile(r"^(\d+)\s*$", re.M)


class CurlDriver(FtpClientDriver):
    """curl as a driver (module docstring)."""

    name = "curl"
    binary = "curl"
    package = "curl"

    def option_error(self, key: str, value: str) -> str | None:
        """One of :data:`OPTIONS` with a value of its kind."""
        return option_error(OPTIONS, "curl", key, value)

    def argv(self, exe: str, workload: str, target: Target, params: WorkloadParams, remote: str,
             local: str) -> list[str]:
        """``curl -q -sS ...`` (module docstring). Raises ValueError for a
        ``client_options`` item not in :data:`OPTIONS` or not of its kind, or a user
        holding ``:`` (curl's user:password separator)."""
        if ":" in target.user:
            raise ValueError(f"user {target.user[:40]!r} holds ':', curl's user:password separator")
        out = [exe, "-q", "-sS", "--user", f"{target.user}:{target.password}"]
        if params.passive == "pasv":
            out.append("--disable-epsv")
        out += flag_argv(OPTIONS, params.client_options, joined=False)
        if workload in UPLOADS:
            out += ["-T", local, "-w", "%{size_upload}\\n"]
        else:
            out += ["-o", local, "-w", "%{size_download}\\n"]
        return [*out, ftp_url(target, remote)]

    def client_bytes(self, workload: str, client: ClientRun, cwd: Path) -> int | None:
        """The number curl's ``-w`` printed on its stdout."""
        return count_from(_COUNT, client.stdout)


DRIVER = CurlDriver()
