"""Driver ``lftp``: the FTP workloads made by lftp processes (Debian package ``lftp``),
seed 003's client (lftp at 100% CPU gaining 33% with a larger ``xfer:buffer-size``).

Each client runs ``lftp --norc -c "SETTINGS; open -u USER,PASSWORD -p PORT HOST; get
NAME -o /dev/null"`` (upload: ``put SOURCE -o NAME``), where SETTINGS are the driver's
own (``xfer:clobber on`` so /dev/null is written over, ``ftp:use-mdtm off`` so lftp does
not set the modification time of /dev/null from the server's, ``xfer:log`` to the
client's own ``xfer.log``, whose ``0-N`` range gives its byte count, ``net:max-retries 1``
so a failure is not retried for minutes, ``ftp:passive-mode on`` and ``ftp:prefer-epsv``
from ``passive``) then one ``set K V`` per ``client_options`` item, e.g.
``{"xfer:buffer-size": "0x20000", "net:socket-buffer": "262144"}``. An option must be
one of lftp's settings (``lftp -c 'set -a'``) and not one the driver sets. Shared
behaviour: runner.drivers.ftpclient.
"""
from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from runner.drivers.clients import ClientRun
from runner.drivers.ftpclient import UPLOADS, FtpClientDriver, value_error
from runner.drivers.labuser import read_client_file

if TYPE_CHECKING:
    from runner.backends.base import Target
    from runner.workloads import WorkloadParams

#: Settings the driver sets itself (module docstring); ``client_options`` may not change them.
RESERVED = ("xfer:clobber", "ftp:use-mdtm", "xfer:log", "xfer:log-file", "ftp:passive-mode", "ftp:prefer-epsv")
NAME_RE = re.compile(r"^[a-z0-9-]+:[a-z0-9-]+(/[\w.:-]+)?$")
_RANGE = re.compile(r"\s(\d+)-(\d+)\s")


@functools.lru_cache(maxsize=1)
def lftp_settings() -> frozenset[str]:
    """Names of lftp's settings (``lftp --norc -c 'set -a'``), empty when lftp cannot run
    within 10 s (then any well-formed name is accepted)."""
    try:
        p = subprocess.run(["lftp", "--norc", "-c", "set -a"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    return frozenset(line.split()[1] for line in p.stdout.splitlines() if line.startswith("set ") and
                     len(line.split()) >= 2)


def _quote(text: str) -> str:
    """``text`` in lftp's double quotes (backslash before ``"`` and ``\\``)."""
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
        """An lftp setting (``name:name`` or ``name:name/closure``), known to this lftp,
        not :data:`RESERVED`, with a plain value."""
        base = key.split("/")[0]
        if not NAME_RE.match(key):
            return f"{key!r} is not an lftp setting name (e.g. xfer:buffer-size)"
        if base in RESERVED:
            return f"{key} is set by the lftp driver itself (docs/methodology.md, 'Real clients')"
        known = lftp_settings()
        if known and base not in known:
            return f"unknown lftp option {key!r} (not among lftp's settings: lftp -c 'set -a')"
        return value_error(key, value)

    def argv(self, exe: str, workload: str, target: Target, params: WorkloadParams, remote: str,
             local: str) -> list[str]:
        """``lftp --norc -c SCRIPT`` (module docstring)."""
        cmds = ["set xfer:clobber on", "set ftp:use-mdtm off", "set xfer:log yes", "set xfer:log-file xfer.log",
                "set net:max-retries 1", "set ftp:passive-mode on",
                f"set ftp:prefer-epsv {'yes' if params.passive == 'epsv' else 'no'}"]
        cmds += [f"set {k} {v}" for k, v in params.client_options.items()]
        cmds.append(f"open -u {_quote(f'{target.user},{target.password}')} -p {target.port} {target.host}")
        if workload in UPLOADS:
            cmds.append(f"put {_quote(local)} -o {_quote(remote)}")
        else:
            cmds.append(f"get {_quote(remote)} -o {_quote(local)}")
        return [exe, "--norc", "-c", "; ".join(cmds)]

    def client_bytes(self, workload: str, client: ClientRun, cwd: Path) -> int | None:
        """The ``START-END`` range of the client's transfer log line (``END - START``)."""
        try:  # the client's user owns cwd: no link or FIFO followed there
            found = _RANGE.findall(read_client_file(cwd / "xfer.log"))
        except OSError:
            return None
        return int(found[-1][1]) - int(found[-1][0]) if found else None


DRIVER = LftpDriver()
