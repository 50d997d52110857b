"""Driver ``curl``: FTP downloads and uploads made by curl processes (Debian package
``curl``).

Each client runs ``curl -q -sS --user USER:PASSWORD [--disable-epsv] [OPTIONS] -o
/dev/null -w '%{size_download}' ftp://HOST:PORT/NAME`` (upload: ``-T SOURCE -w
'%{size_upload}'``); the number it prints is its byte count. ``passive: pasv`` adds
``--disable-epsv``; ``epsv`` is curl's default (EPSV first, PASV if the server refuses
it). ``client_options``: the options of :data:`OPTIONS` (``{"--tcp-nodelay": ""}``).
The curl tool has no receive-buffer option (libcurl's ``CURLOPT_BUFFERSIZE`` is not on
its command line, and ``--limit-rate`` limits the rate); ``--no-buffer`` only stops it
buffering its output. Shared behaviour: runner.drivers.ftpclient.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from runner.drivers.clients import ClientRun
from runner.drivers.ftpclient import UPLOADS, FtpClientDriver, count_from, flag_argv, flag_options
from runner.drivers.wget import ftp_url

if TYPE_CHECKING:
    from runner.backends.base import Target
    from runner.workloads import WorkloadParams

#: curl options ``client_options`` may give: option -> takes a value.
OPTIONS: dict[str, bool] = {"--tcp-nodelay": False, "--tcp-fastopen": False, "--no-keepalive": False,
                            "--keepalive-time": True, "--ftp-method": True, "--ftp-skip-pasv-ip": False,
                            "--ftp-pret": False, "--local-port": True, "--interface": True, "--no-buffer": False,
                            "--ipv4": False, "--connect-timeout": True}
_COUNT = re.compile(r"^(\d+)\s*$", re.M)


class CurlDriver(FtpClientDriver):
    """curl as a driver (module docstring)."""

    name = "curl"
    binary = "curl"
    package = "curl"

    def option_error(self, key: str, value: str) -> str | None:
        """One of :data:`OPTIONS`."""
        return flag_options(key, value, OPTIONS, "curl")

    def argv(self, exe: str, workload: str, target: Target, params: WorkloadParams, remote: str,
             local: str) -> list[str]:
        """``curl -q -sS ...`` (module docstring)."""
        out = [exe, "-q", "-sS", "--user", f"{target.user}:{target.password}"]
        if params.passive == "pasv":
            out.append("--disable-epsv")
        out += flag_argv(params.client_options, OPTIONS, joined=False)
        if workload in UPLOADS:
            out += ["-T", local, "-w", "%{size_upload}\\n"]
        else:
            out += ["-o", local, "-w", "%{size_download}\\n"]
        return [*out, ftp_url(target, remote)]

    def client_bytes(self, workload: str, client: ClientRun, cwd: Path) -> int | None:
        """The number curl's ``-w`` printed on its stdout."""
        return count_from(_COUNT, client.stdout)


DRIVER = CurlDriver()
