"""A fake ``/proc`` tree for the cgroup readers (runner.metrics.cgroup, runner.metrics.cgroup_cpu),
which take the folder to read as ``/proc``."""
from __future__ import annotations

from pathlib import Path


def fake_proc(tmp: Path, pid: int, cgroup: str) -> Path:
    """Make ``tmp/proc/PID/cgroup`` holding ``cgroup`` (the text of a ``/proc/PID/cgroup``)
    and return ``tmp/proc``."""
    proc = tmp / "proc"
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text(cgroup)
    return proc
