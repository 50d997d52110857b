"""Helper process of runner.metrics.sampler.TreeSampler (run as
``python -m runner.metrics._sampler_worker PID INTERVAL MAX_SECONDS``).

Samples the tree of PID every INTERVAL seconds (adaptively longer when a sample costs
more than 10% of the interval), keeps peaks and a timeline, and answers JSON-line
commands on stdin, one JSON line each on stdout:

    {"cmd": "checkpoint", "name": N} -> {"snapshot": MemSnapshot dict}
    {"cmd": "status"}                 -> {"peak_uss", "peak_rss_minus_shared", "samples", "interval"}
    {"cmd": "cpu"}                    -> {"user": s, "system": s}
    {"cmd": "stop"}                   -> final report (peaks, timeline, stats), then exit

Exits by itself on stdin EOF (parent gone) or after MAX_SECONDS.
"""
from __future__ import annotations

import json
import os
import select
import sys
import time

from runner.metrics.tree import TreeAccessError, check_readable, cpu_sample, mem_sample

MAX_TIMELINE = 200_000  # samples kept; beyond, every other one is dropped


def main(argv: list[str]) -> int:
    pid, interval, max_seconds = int(argv[0]), float(argv[1]), float(argv[2])
    out = sys.stdout

    def send(obj: dict) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    try:
        check_readable(pid)
    except (ProcessLookupError, TreeAccessError) as e:
        send({"error": f"{type(e).__name__}: {e}"})
        return 1
    t0 = time.monotonic()
    base_interval = interval
    timeline: list[list] = []
    stride = 1  # keep every stride-th sample once the timeline was thinned
    nsamples = 0
    peak_uss = peak_rms = 0
    cost_max = 0.0
    send({"ok": True, "t0_delay": 0.0})

    def take(name: str = "") -> dict:
        nonlocal peak_uss, peak_rms, nsamples, stride, timeline, interval, cost_max
        c0 = time.monotonic()
        s = mem_sample(pid, t0, name)
        cost = time.monotonic() - c0
        cost_max = max(cost_max, cost)
        # bound the cost: a sample may use at most ~10% of one core
        interval = min(5.0, max(base_interval, cost * 10))
        peak_uss = max(peak_uss, s.uss)
        peak_rms = max(peak_rms, s.rss_minus_shared)
        nsamples += 1
        if nsamples % stride == 0:
            timeline.append([round(s.t, 4), s.uss, s.rss_minus_shared, s.nprocs])
            if len(timeline) >= MAX_TIMELINE:
                timeline = timeline[::2]
                stride *= 2
        return s.to_dict()

    stdin = sys.stdin.buffer
    buf = b""
    next_at = time.monotonic()
    deadline = t0 + max_seconds
    while time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_at:
            take()
            next_at = time.monotonic() + interval
        r, _, _ = select.select([stdin], [], [], max(0.0, next_at - time.monotonic()))
        if not r:
            continue
        chunk = os.read(stdin.fileno(), 65536)
        if not chunk:
            return 0  # parent went away
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                send({"error": f"bad command {line[:100]!r}"})
                continue
            cmd = msg.get("cmd")
            if cmd == "checkpoint":
                send({"snapshot": take(str(msg.get("name", "")))})
            elif cmd == "status":
                send({"peak_uss": peak_uss, "peak_rss_minus_shared": peak_rms,
                      "samples": nsamples, "interval": interval})
            elif cmd == "cpu":
                u, s = cpu_sample(pid)
                send({"user": u, "system": s})
            elif cmd == "stop":
                take()
                send({"peak_uss": peak_uss, "peak_rss_minus_shared": peak_rms, "samples": nsamples,
                      "timeline": timeline, "interval": interval, "sample_cost_max": cost_max,
                      "duration": time.monotonic() - t0})
                return 0
            else:
                send({"error": f"unknown command {cmd!r}"})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
