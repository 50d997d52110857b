"""Driver ``lftp``: the FTP workloads made by lftp processes (Debian package ``lftp``),
seed 003's client (lftp at 100% CPU gaining 33% with a larger ``xfer:buffer-size``).

Each client runs ``lftp --norc -c "SETTINGS; open -u "USER,PASSWORD" -p PORT "HOST"; get
"NAME" -o "/dev/null""`` (upload: ``put "SOURCE" -o "NAME"``), where SETTINGS are the
driver's own (``xfer:clobber on`` so /dev/null is written over, ``ftp:use-mdtm off`` so
lftp does not set the modification time of /dev/null from the server's, ``xfer:log`` to
the client's own ``xfer.log``, whose ``0-N`` range gives its byte count,
``net:max-retries 1`` so a failure is not retried for minutes, ``ftp:passive-mode on`` and
``ftp:prefer-epsv`` from ``passive``: :data:`RESERVED`) then one ``set NAME VALUE`` per
``client_options`` item, e.g. ``{"xfer:buffer-size": "0x20000", "net:socket-buffer":
"262144"}``. Only the settings of :data:`SETTINGS` are taken, each with a typed value
(runner.load.tools.options) written in its canonical form; every string from the target
(user, password, host) and every path is in lftp's double quotes. Shared behaviour:
runner.load.tools.ftp_tool.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from runner.load.tools.ftp_tool import UPLOADS, FtpClientDriver
from runner.load.tools.labuser import read_client_file
from runner.load.tools.options import BOOLEAN, Option, canonical, integer, option_error, seconds, table
from runner.load.tools.spawn import ClientRun

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.target import Target

#: Settings the driver sets itself (module docstring); ``client_options`` may not change them.
RESERVED = ("xfer:clobber", "ftp:use-mdtm", "xfer:log", "xfer:log-file", "net:max-retries", "ftp:passive-mode",
            "ftp:prefer-epsv")
MIB = 1 << 20
#: The lftp settings ``client_options`` may give (lftp 4.9's ``set -a`` names), typed.
SETTINGS: dict[str, Option] = table(
    Option("xfer:buffer-size", integer(512, 64 * MIB, hex_ok=True),
           "bytes lftp reads and writes per I/O call (default 0x10000; seed 003)"),
    Option("net:socket-buffer", integer(0, 64 * MIB), "SO_SNDBUF/SO_RCVBUF of lftp's sockets, bytes (0: the "
                                                      "kernel's autotuning, the default)"),
    Option("net:socket-maxseg", integer(0, 65535), "TCP_MAXSEG of lftp's sockets, bytes (0: the system's)"),
    Option("net:timeout", seconds(1, 3600, whole=True), "seconds without progress before lftp drops a "
                                                        "connection (default 300)"),
    Option("net:connection-limit", integer(0, 64), "most simultaneous connections to one site (0: no limit)"),
    Option("net:limit-rate", integer(0, 1 << 40), "bytes/s cap of each transfer (0: none, the default)"),
    Option("ftp:use-feat", BOOLEAN, "send FEAT after login (default yes)"),
    Option("ftp:sync-mode", BOOLEAN, "send one command at a time, waiting for each reply (default on)"),
    Option("ftp:use-size", BOOLEAN, "ask SIZE before a download (default yes)"),
    Option("ftp:use-quit", BOOLEAN, "send QUIT before disconnecting (default yes)"),
    Option("ftp:ssl-allow", BOOLEAN, "AUTH TLS when the server offers it (default yes; the driver speaks "
                                     "plain FTP)"),
    Option("ftp:ignore-pasv-address", BOOLEAN, "connect the data channel to the control address, not PASV's"),
)
_RANGE = re.compile(r"\s(\d+)-(\d+)\s")


def lftp_quote(text: str) -> str:
    """``text`` as one lftp word in double quotes (a backslash before ``"`` and ``\\``):
    inside them ``;``, ``!``, ``&``, ``|``, spaces and ``#`` are plain characters. Raises
    ValueError for a control character (lftp would end the command at a newline)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ValueError(f"control character in {text[:40]!r}: not passed to lftp")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class LftpDriver(FtpClientDriver):
    """lftp as a driver (module docstring)."""

    name = "lftp"
    binary = "lftp"
    package = "lftp"

    def version(self) -> str:
        """lftp's version, e.g. ``LFTP | Version 4.9.2`` (its first line without the copyright)."""
        return super().version().split(" | Copyright")[0]

    def option_error(self, key: str, value: str) -> str | None:
        """One of :data:`SETTINGS` with a value of its kind (runner.load.tools.options)."""
        return option_error(SETTINGS, "lftp", key, value, RESERVED)

    def argv(self, exe: str, workload: str, target: Target, params: WorkloadParams, remote: str,
             local: str) -> list[str]:
        """``lftp --norc -c SCRIPT`` (module docstring): one ``; ``-separated command per
        setting, then ``open`` and ``get``/``put``.

        Raises:
            ValueError: a ``client_options`` item not in :data:`SETTINGS` or not of its
                kind, a user holding ``,`` (lftp's user/password separator), a control
                character in the user, password, host or a path.
        """
        if "," in target.user:
            raise ValueError(f"user {target.user[:40]!r} holds ',', lftp's user,password separator")
        cmds = ["set xfer:clobber on", "set ftp:use-mdtm off", "set xfer:log yes", "set xfer:log-file xfer.log",
                "set net:max-retries 1", "set ftp:passive-mode on",
                f"set ftp:prefer-epsv {'yes' if params.passive == 'epsv' else 'no'}"]
        cmds += [f"set {name} {text}" for name, text, _ in canonical(SETTINGS, params.client_options)]
        login = lftp_quote(f"{target.user},{target.password}")
        cmds.append(f"open -u {login} -p {int(target.port)} {lftp_quote(target.host)}")
        if workload in UPLOADS:
            cmds.append(f"put {lftp_quote(local)} -o {lftp_quote(remote)}")
        else:
            cmds.append(f"get {lftp_quote(remote)} -o {lftp_quote(local)}")
        return [exe, "--norc", "-c", "; ".join(cmds)]

    def client_bytes(self, workload: str, client: ClientRun, cwd: Path) -> int | None:
        """The ``START-END`` range of the client's transfer log line (``END - START``)."""
        try:  # the client's user owns cwd: no link or FIFO followed there
            found = _RANGE.findall(read_client_file(cwd / "xfer.log"))
        except OSError:
            return None
        return int(found[-1][1]) - int(found[-1][0]) if found else None


DRIVER = LftpDriver()
