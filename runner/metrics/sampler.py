"""Memory and CPU sampler for a server's whole process tree.

:class:`TreeSampler` follows the root pid and all its descendants, recursively,
re-enumerated at every sample (vsftpd and proftpd fork one process per client), and
records per sample the sums over the tree of:

* USS: psutil ``memory_full_info().uss`` (private pages; psutil reads
  ``/proc/PID/smaps_rollup``, about 20-50 us per process);
* rss - shared: psutil ``memory_info().rss - .shared``, seed 000's formula (ftpbench's
  memory column, there for the server pid only; summed over the tree here).

Where it runs: periodic sampling happens in a small helper process
(``python -m runner.metrics._sampler_worker``) talking JSON lines over pipes, so it
never competes for the load generator's GIL nor stalls its event loop; the load
generator only pays for a pipe round trip at checkpoints. Its cost is bounded: when
one sample takes more than 10% of the interval (a tree of hundreds of processes), the
interval grows to 10x the sample cost (at most 5 s), so the helper uses at most about
10% of one core. It can be pinned with ``cpu=[...]``.

Units: bytes for memory, seconds for time and CPU.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from typing import Any

from runner.metrics.tree import MemSnapshot, TreeAccessError, check_readable, cpu_sample, mem_sample

__all__ = ["MemSnapshot", "SamplerError", "TreeAccessError", "TreeSampler"]


class SamplerError(Exception):
    """The helper process failed, answered garbage, or did not answer in time."""


class TreeSampler:
    """Samples memory (USS, rss - shared) and CPU of the process tree rooted at ``pid``.

    Args:
        pid: root of the tree (e.g. ServerHandle.pid).
        interval: seconds between periodic samples (0.1 default; grows adaptively,
            see module docstring).
        cpu: CPUs to pin the helper process to (sched_setaffinity), or None.
        max_seconds: the helper stops sampling after this long (bound; default 6 h).
        reply_timeout: seconds to wait for any answer of the helper.

    Raises (from the constructor):
        ProcessLookupError: no process ``pid``.
        TreeAccessError: the process exists but its memory cannot be read.

    Usage::

        s = TreeSampler(handle.pid); s.start()
        s.checkpoint("idle")              # -> MemSnapshot
        ... run load ...
        s.stop()
        s.peak_uss, s.peak_rss_minus_shared, s.timeline, s.checkpoints

    Without start(), checkpoint() and cpu_times() sample synchronously in this process,
    and peaks cover the checkpoints only.
    """

    def __init__(self, pid: int, interval: float = 0.1, *, cpu: list[int] | None = None,
                 max_seconds: float = 6 * 3600, reply_timeout: float = 30.0):
        if interval <= 0:
            raise ValueError("interval must be > 0 seconds")
        check_readable(pid)
        self.pid = pid
        self.interval = interval
        self.cpu = cpu
        self.max_seconds = max_seconds
        self.reply_timeout = reply_timeout
        self.checkpoints: list[MemSnapshot] = []
        self.stats: dict[str, Any] = {}
        self._timeline: list[tuple[float, int, int, int]] = []
        self._peak_uss = 0
        self._peak_rms = 0
        self._proc: subprocess.Popen | None = None
        self._t0 = time.monotonic()
        self._stopped = False

    # -- helper process -----------------------------------------------------------
    def start(self) -> TreeSampler:
        """Start the helper process and periodic sampling; returns self.
        Raises SamplerError if the helper cannot start or read the tree."""
        if self._proc is not None:
            return self
        cpu = self.cpu

        def preexec() -> None:
            if cpu:
                os.sched_setaffinity(0, cpu)

        env = dict(os.environ)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "runner.metrics._sampler_worker", str(self.pid),
             str(self.interval), str(self.max_seconds)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=preexec, env=env)
        self._t0 = time.monotonic()
        first = self._read()
        if "error" in first:
            self._kill()
            raise SamplerError(f"sampler for pid {self.pid}: {first['error']}")
        return self

    def _read(self) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        r, _, _ = select.select([self._proc.stdout], [], [], self.reply_timeout)
        if not r:
            self._kill()
            raise SamplerError(f"sampler helper gave no answer within {self.reply_timeout:.0f} s")
        line = self._proc.stdout.readline()
        if not line:
            err = self._proc.stderr.read().decode(errors="replace")[-2000:] if self._proc.stderr else ""
            self._kill()
            raise SamplerError(f"sampler helper exited: {err.strip() or 'no output'}")
        try:
            return json.loads(line)
        except ValueError as e:
            raise SamplerError(f"sampler helper answered garbage: {line[:200]!r}") from e

    def _ask(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write((json.dumps(cmd) + "\n").encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise SamplerError(f"sampler helper is gone: {e}") from e
        ans = self._read()
        if "error" in ans:
            raise SamplerError(ans["error"])
        return ans

    def _running(self) -> bool:
        return self._proc is not None and not self._stopped

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    # -- API ----------------------------------------------------------------------
    def checkpoint(self, name: str) -> MemSnapshot:
        """Take one sample now, record it under ``name`` (in ``checkpoints``) and return
        it. Synchronous: returns when the sample is done (a pipe round trip plus the
        sample itself when the helper runs)."""
        if self._running():
            d = self._ask({"cmd": "checkpoint", "name": name})["snapshot"]
            snap = MemSnapshot(**d)
        else:
            snap = mem_sample(self.pid, self._t0, name)
        self._peak_uss = max(self._peak_uss, snap.uss)
        self._peak_rms = max(self._peak_rms, snap.rss_minus_shared)
        self.checkpoints.append(snap)
        return snap

    def cpu_times(self) -> tuple[float, float]:
        """CPU seconds (user, system) used so far by the tree; take the difference of two
        calls for a phase.

        Covered: every live process of the tree (its own time) plus, for each, the time
        of its children that exited and were waited for (``children_user`` /
        ``children_system``, i.e. /proc/PID/stat cutime/cstime); so per-client processes
        of vsftpd/proftpd count after they exit, through their parent (the root).
        Not covered: descendants that were re-parented away (double-forked daemons,
        reaped by init or a subreaper), and exited children not yet waited for (zombies)
        until their parent reaps them.
        """
        if self._running():
            d = self._ask({"cmd": "cpu"})
            return float(d["user"]), float(d["system"])
        return cpu_sample(self.pid)

    def stop(self) -> None:
        """Take a last sample, stop the helper, and fill ``timeline`` and the peaks.
        Idempotent; bounded by ``reply_timeout``."""
        if self._proc is None or self._stopped:
            self._stopped = True
            return
        try:
            d = self._ask({"cmd": "stop"})
            self._timeline = [tuple(x) for x in d["timeline"]]  # type: ignore[misc]
            self._peak_uss = max(self._peak_uss, int(d["peak_uss"]))
            self._peak_rms = max(self._peak_rms, int(d["peak_rss_minus_shared"]))
            self.stats = {k: d[k] for k in ("samples", "interval", "sample_cost_max", "duration")}
        finally:
            self._stopped = True
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill()
            for f in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
                if f:
                    f.close()

    def _status(self) -> None:
        if self._running():
            d = self._ask({"cmd": "status"})
            self._peak_uss = max(self._peak_uss, int(d["peak_uss"]))
            self._peak_rms = max(self._peak_rms, int(d["peak_rss_minus_shared"]))

    @property
    def peak_uss(self) -> int:
        """Peak of the tree's summed USS, bytes, over all samples so far."""
        self._status()
        return self._peak_uss

    @property
    def peak_rss_minus_shared(self) -> int:
        """Peak of the tree's summed rss - shared (seed 000's formula), bytes."""
        self._status()
        return self._peak_rms

    @property
    def timeline(self) -> list[tuple[float, int, int, int]]:
        """Periodic samples as (t seconds since start, uss bytes, rss_minus_shared bytes,
        nprocs); filled by stop() (empty before). Thinned to every 2^k-th sample past
        200,000 samples."""
        return list(self._timeline)

    def __enter__(self) -> TreeSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:  # never leave a helper behind
        try:
            self._kill()
        except Exception:
            pass
