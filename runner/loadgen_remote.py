"""``xferlab loadgen``: one workload phase from this host, made by any driver
(runner.drivers, ``--driver``), started at a given wall-clock time, printed as JSON.
The multi-host runner (runner.multihost.control) runs it over SSH on every client host
with a common ``--start-at`` and combines the results.

Output (stdout, one JSON object; format ``xferlab-loadgen/1``)::

    {"format": "xferlab-loadgen/1", "host": "cli1", "workload": "login", "driver": "xferlab-ftp",
     "start_at": 1700000000.0, "late_s": 0.002,
     "result": {"workload": ..., "elapsed_s": ..., "bytes": ..., "ops": ...,
                "latencies_ms": [...], "errors": {...},
                "clients": [[bytes, seconds, ok, requests, max_rss, minor_faults, major_faults], ...],
                "client_cpu_user_s": ..., "client_cpu_system_s": ...,
                "notes": [...], "started_at": ..., "ended_at": ...},
     "environment": {... runner.metrics.environment.snapshot() of this host ...}}

or, when nothing could be measured (runner.drivers.LoadError), the driver cannot run
here (runner.drivers.DriverUnavailable) or the arguments are wrong, ``{"format": ...,
"host": ..., "error": "..."}`` with exit status 3 (2 for usage errors). Units as PhaseResult:
bytes, seconds, milliseconds; ``started_at`` /
``ended_at`` / ``start_at`` are epoch seconds (``time.time()``), so the hosts' clocks
must be synchronised (NTP) for the combined elapsed time to be right.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from dataclasses import asdict
from typing import Any

from runner.drivers.result import ClientFigures, PhaseResult

FORMAT = "xferlab-loadgen/1"
#: Longest wait for ``--start-at`` (s): a start time further ahead is a usage error.
MAX_WAIT_S = 300.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``xferlab loadgen`` (used by runner/cli.py)."""
    p.add_argument("--host", required=True, help="FTP server address")
    p.add_argument("--port", type=int, required=True, help="FTP control port")
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--workload", required=True, help="workload name (runner.workloads)")
    p.add_argument("--driver", default=None,
                   help="what makes the load (runner.drivers; default xferlab's own asyncio FTP client)")
    p.add_argument("--params", default="{}", help="workload parameters as JSON (WorkloadParams fields)")
    p.add_argument("--start-at", type=float, default=None,
                   help="epoch seconds at which to start the phase (sleeps until then; default now)")
    p.add_argument("--cpu", default=None, help="pin this load generator to CPUs, e.g. 1 or 0,1")
    p.add_argument("--name", default=None, help="host name to report (default: this host's name)")
    p.add_argument("--http-port", type=int, default=None, help="HTTP port of the server (HTTP workloads)")
    p.add_argument("--netns", default=None,
                   help="join this network namespace to connect (/proc/PID/ns/net of the server; needs root)")
    p.add_argument("--tls", default=None, help="FTPS: JSON of runner.backends.base.TargetTls (mode, ca_file, "
                   "server_name, key_type)")
    p.add_argument("--no-environment", action="store_true",
                   help="leave the machine snapshot out of the output (a client process of this machine)")


def result_to_json(result: PhaseResult) -> dict[str, Any]:
    """A PhaseResult as a JSON-friendly dict (clients as ``[bytes, seconds, ok, requests,
    max_rss, minor_faults, major_faults]`` lists; a reader takes the first three or four
    of an older document's shorter lists)."""
    d = asdict(result)
    d["clients"] = [[c.bytes, c.seconds, c.ok, c.requests, c.max_rss, c.minor_faults, c.major_faults]
                    for c in result.clients]
    return d


def result_from_json(d: dict[str, Any]) -> PhaseResult:
    """Inverse of :func:`result_to_json`: a PhaseResult. Raises KeyError/TypeError on a
    malformed dict."""
    d = dict(d)
    d["clients"] = [ClientFigures(int(c[0]), float(c[1]), bool(c[2]), int(c[3]) if len(c) > 3 else 0,
                                  *(int(x) for x in c[4:7]))
                    for c in d.get("clients", [])]
    return PhaseResult(**d)


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main(args: argparse.Namespace) -> int:
    """Run ``xferlab loadgen``: wait for ``--start-at``, run the workload against
    ``--host:--port``, print the JSON document described in the module docstring.
    Returns the exit status: 0 measured (even with failed operations: they are in
    ``errors``), 2 bad arguments, 3 nothing measured."""
    from pydantic import ValidationError

    from runner.backends.base import Target, TargetTls
    from runner.drivers import DEFAULT_DRIVER, DriverUnavailable, LoadError, get_driver
    from runner.metrics.environment import snapshot
    from runner.workloads import WORKLOADS, WorkloadParams

    host = args.name or socket.gethostname()
    head = {"format": FORMAT, "host": host, "workload": args.workload}
    if args.workload not in WORKLOADS:
        _emit({**head, "error": f"unknown workload {args.workload!r}; known: {', '.join(WORKLOADS)}"})
        return 2
    try:
        driver = get_driver(args.driver or DEFAULT_DRIVER)
    except ValueError as exc:
        _emit({**head, "error": f"--driver: {exc}"})
        return 2
    head["driver"] = driver.name
    if args.workload not in driver.workloads:
        _emit({**head, "error": f"driver {driver.name!r} cannot run workload {args.workload!r}; "
                                f"it runs: {', '.join(driver.workloads)}"})
        return 2
    try:
        driver.check()
    except DriverUnavailable as exc:
        _emit({**head, "error": f"driver {driver.name!r} unavailable here: {exc}"})
        return 3
    try:
        params = WorkloadParams.model_validate(json.loads(args.params))
    except (json.JSONDecodeError, ValidationError) as exc:
        _emit({**head, "error": f"--params: {exc}"})
        return 2
    if args.cpu:
        try:
            os.sched_setaffinity(0, [int(c) for c in args.cpu.split(",")])
        except (ValueError, OSError) as exc:
            _emit({**head, "error": f"--cpu {args.cpu}: {exc}"})
            return 2
    env = {} if args.no_environment else snapshot({"role": "client", "name": host})
    start_at = args.start_at if args.start_at is not None else time.time()
    wait = start_at - time.time()
    if wait > MAX_WAIT_S:
        _emit({**head, "error": f"--start-at is {wait:.0f} s ahead (at most {MAX_WAIT_S:g} s)"})
        return 2
    if wait > 0:
        time.sleep(wait)
    late = time.time() - start_at
    tls = TargetTls(**json.loads(args.tls)) if getattr(args, "tls", None) else None
    target = Target(args.host, args.port, args.user, args.password, netns=args.netns,
                    http_port=getattr(args, "http_port", None), tls=tls)
    try:
        result = driver.run(args.workload, target, params)
    except LoadError as exc:
        _emit({**head, "start_at": start_at, "late_s": late, "error": str(exc), "environment": env})
        return 3
    _emit({**head, "start_at": start_at, "late_s": late, "result": result_to_json(result), "environment": env})
    return 0
