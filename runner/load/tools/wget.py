"""Driver ``wget``: FTP downloads made by wget processes (Debian package ``wget``), seed
003's client (512 concurrent ``wget`` processes downloading a 1 MB file).

Each client runs ``wget --no-config -nv --tries=1 -O /dev/null --user=USER
--password=PASSWORD [OPTIONS] ftp://HOST:PORT/NAME``; its byte count is the ``[N] ->
"/dev/null"`` of its ``-nv`` line. wget cannot upload (it runs ``retr`` and ``retr_concurrent`` only) and
sends PASV to an IPv4 server whatever it is told (``passive: epsv`` is refused).
``client_options``: the options of :data:`OPTIONS` (``{"--read-timeout": "30"}``;
``""`` for a flag), each value typed (runner.load.tools.options) and passed in its
canonical form; wget has no buffer-size option. Shared behaviour:
runner.load.tools.ftp_tool.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from runner.load.tools.ftp_tool import FtpClientDriver, count_from
from runner.load.tools.options import FLAG, IP_ADDRESS, Option, choice, flag_argv, integer, option_error, seconds, table
from runner.load.tools.spawn import ClientRun

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.target import Target

#: wget options ``client_options`` may give, typed.
OPTIONS: dict[str, Option] = table(
    Option("--read-timeout", seconds(0.001, 3600), "most seconds without data on a connection (default 900)"),
    Option("--connect-timeout", seconds(0.001, 3600), "most seconds for a connection to be made"),
    Option("--dns-timeout", seconds(0.001, 3600), "most seconds for a name to resolve"),
    Option("--timeout", seconds(0.001, 3600), "the three timeouts above at once"),
    Option("--tries", integer(1, 20), "attempts per file (the driver gives 1; 0, wget's 'forever', is refused)"),
    Option("--bind-address", IP_ADDRESS, "local address to connect from"),
    Option("--prefer-family", choice("IPv4", "IPv6", "none"), "address family tried first"),
    Option("--no-dns-cache", FLAG, "resolve the name again for every connection"),
    Option("--no-glob", FLAG, "no FTP globbing of the file name"),
)
_SAVED = re.compile(r"\[(\d+)\] -> ")


def ftp_url(target: Target, name: str) -> str:
    """``ftp://HOST:PORT/NAME`` (an IPv6 host in brackets)."""
    host = f"[{target.host}]" if ":" in target.host else target.host
    return f"ftp://{host}:{target.port}/{name}"


class WgetDriver(FtpClientDriver):
    """wget as a driver (module docstring)."""

    name = "wget"
    binary = "wget"
    package = "wget"
    uploads = False
    workloads: tuple[str, ...] = ("retr", "retr_concurrent")

    def passive_error(self, passive: str) -> str | None:
        """wget sends PASV to an IPv4 server (EPSV only over IPv6): ``epsv`` is refused."""
        return None if passive == "pasv" else "wget sends PASV to an IPv4 server; passive: epsv cannot be honoured"

    def option_error(self, key: str, value: str) -> str | None:
        """One of :data:`OPTIONS` with a value of its kind."""
        return option_error(OPTIONS, "wget", key, value)

    def argv(self, exe: str, workload: str, target: Target, params: WorkloadParams, remote: str,
             local: str) -> list[str]:
        """``wget ... -O /dev/null URL`` (module docstring). Raises ValueError for a
        ``client_options`` item not in :data:`OPTIONS` or not of its kind."""
        return [exe, "--no-config", "-nv", "--tries=1", "-O", local, f"--user={target.user}",
                f"--password={target.password}", *flag_argv(OPTIONS, params.client_options, joined=True),
                ftp_url(target, remote)]

    def client_bytes(self, workload: str, client: ClientRun, cwd: Path) -> int | None:
        """The ``[N]`` of wget's ``-nv`` line on its stderr."""
        return count_from(_SAVED, client.stderr)


DRIVER = WgetDriver()
