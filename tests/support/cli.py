"""Running ``xferlab`` (``python -m runner.cli``) as a command from a test."""
from __future__ import annotations

import subprocess
import sys

#: The command line of xferlab in this interpreter.
XFERLAB = [sys.executable, "-m", "runner.cli"]


def run_cli(args: list[str], env: dict[str, str] | None = None, *, timeout: float = 120.0) -> str:
    """Run ``xferlab ARGS`` with ``env`` (None: this process's) for at most ``timeout`` s and
    return its stdout; the test fails with its exit status, stdout and stderr when it exits
    non-zero (subprocess.TimeoutExpired propagates)."""
    p = subprocess.run([*XFERLAB, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert p.returncode == 0, f"xferlab {' '.join(args)} exited {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}"
    return p.stdout
