"""Fixtures for metrics tests: a real process that forks children on demand."""
from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

# Parent: for each line on stdin "N MiB", fork a child that touches N MiB of private
# memory, burns ~0.2 s CPU, then sleeps; "reap" kills and waits for all children;
# EOF ends everything. Every child exits after 60 s at most.
FORKER = r"""
import os, sys, time, signal
kids = []
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "fork":
        pid = os.fork()
        if pid == 0:
            b = bytearray(int(cmd[1]) << 20)
            for i in range(0, len(b), 4096):
                b[i] = 1
            t = time.process_time()
            while time.process_time() - t < 0.2:
                pass
            time.sleep(60)
            os._exit(0)
        kids.append(pid)
    elif cmd[0] == "reap":
        for k in kids:
            os.kill(k, signal.SIGKILL)
            os.waitpid(k, 0)
        kids = []
    print("ok", flush=True)
for k in kids:
    os.kill(k, signal.SIGKILL)
"""


class Forker:
    """Handle on the forking process: ``pid``, ``fork(mib)``, ``reap()``, ``nprocs()``."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", FORKER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid

    def _cmd(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def fork(self, mib: int) -> None:
        self._cmd(f"fork {mib}")

    def reap(self) -> None:
        self._cmd("reap")

    def nprocs(self) -> int:
        return 1 + len(psutil.Process(self.pid).children(recursive=True))

    def wait_children_ready(self, n: int, timeout: float = 10.0) -> None:
        """Wait (bounded) until n children exist and each has touched its memory."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            kids = psutil.Process(self.pid).children()
            if len(kids) == n and all(k.status() == psutil.STATUS_SLEEPING for k in kids):
                return
            time.sleep(0.05)
        raise TimeoutError(f"children of {self.pid} not ready in {timeout} s")

    def close(self) -> None:
        for k in psutil.Process(self.pid).children(recursive=True):
            k.kill()
        self.proc.stdin.close()
        self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def forker():
    f = Forker()
    yield f
    try:
        f.close()
    except psutil.Error:
        pass
