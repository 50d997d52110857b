"""A real pyftpdlib server on 127.0.0.1 as a subprocess (``pyftpd_server.py``), for the tests
that need an FTP server but not one of the servers under test."""
from __future__ import annotations

import select
import subprocess
import sys
import time
from pathlib import Path

from tests.support import SUPPORT_DIR

USER, PASSWORD = "bench", "s3cret"


def start_pyftpd(home: Path, host: str = "127.0.0.1", *, drop_third: bool = False,
                 cap: int | None = None, login_log: Path | None = None,
                 idle: float | None = None) -> tuple[subprocess.Popen, int]:
    """Start pyftpd_server.py; return (process, port). Bounded wait of 15 s. ``drop_third``:
    the server deletes every third file it receives by STOR (after its 226). ``cap``: all
    its data sends share one token bucket of ``cap`` bytes/s (pyftpd_server.py). ``login_log``: the
    server appends a line per successful login to that file; ``idle``: it ends control
    connections idle that many seconds."""
    proc = subprocess.Popen(
        [sys.executable, str(SUPPORT_DIR / "pyftpd_server.py"), str(home), USER, PASSWORD, host,
         *(["dropthird"] if drop_third else []), *([f"cap={int(cap)}"] if cap else []),
         *([f"loginlog={login_log}"] if login_log else []), *([f"idle={idle:g}"] if idle else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 15
    line = ""
    while time.monotonic() < deadline:
        r, _, _ = select.select([proc.stdout], [], [], 0.2)
        if r:
            line = proc.stdout.readline()
            break
        if proc.poll() is not None:
            break
    if not line.startswith("PORT "):
        proc.kill()
        proc.wait(timeout=5)
        err = proc.stderr.read()[:2000]
        stop(proc)
        raise RuntimeError(f"pyftpdlib did not start: {line!r} {err}")
    return proc, int(line.split()[1])


def stop(proc: subprocess.Popen) -> None:
    """Terminate the server (SIGTERM, then SIGKILL after 5 s), wait for it and close its pipes."""
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
