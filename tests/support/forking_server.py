"""A forking test server whose session processes do known CPU work and leave no trace in
a process-tree sum. Standard library only: it runs on the host and in any image with
python3 (``python3 forking_server.py FIFO OUT BURN_S``).

It reads commands, one per line, from the FIFO (reopened at each writer's EOF):

* ``go K``: fork a session process, and wait for it (the listener reaps its children).
  The session forks a worker and exits at once without waiting for it, as a daemon's
  double fork does; the worker, re-parented to init (or the container's init), burns
  ``BURN_S`` seconds of its own CPU (``time.process_time``, CLOCK_PROCESS_CPUTIME_ID),
  writes ``OUT/done-K`` and exits. Its CPU is in the cgroup's counters and in no live
  process of the listener's tree, nor in the listener's ``cutime``/``cstime``.
* ``quit``: exit.

Every loop is bounded: at most 1,000 commands, and the listener exits after 300 s.
"""
from __future__ import annotations

import os
import sys
import time


def burn(seconds: float) -> None:
    """Use ``seconds`` of this process's CPU time, then return."""
    t0 = time.process_time()
    while time.process_time() - t0 < seconds:
        pass


def serve(fifo: str, out: str, burn_s: float) -> int:
    """The listener loop (see the module docstring); returns the exit code."""
    deadline = time.monotonic() + 300.0
    n = 0
    while n < 1000 and time.monotonic() < deadline:
        with open(fifo) as f:  # blocks until a writer opens the FIFO
            for line in f:
                n += 1
                cmd = line.split()
                if not cmd:
                    continue
                if cmd[0] == "quit":
                    return 0
                if cmd[0] != "go" or len(cmd) != 2 or not cmd[1].isdigit():
                    continue
                pid = os.fork()
                if pid == 0:  # the session process
                    if os.fork() == 0:  # the worker
                        burn(burn_s)
                        with open(os.path.join(out, f"done-{cmd[1]}"), "w") as done:
                            done.write(f"{time.process_time():.6f}\n")
                        os._exit(0)
                    os._exit(0)  # without waiting for the worker
                os.waitpid(pid, 0)
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], sys.argv[2], float(sys.argv[3])))
