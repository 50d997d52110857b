"""``xferlab loadgen``: one workload phase from this host, made by any driver
(runner.load.registry, ``--driver``), started at a given wall-clock time, printed as JSON.
The multi-host runner (runner.cell.remote) runs it over SSH on every client host
with a common ``--start-at`` and combines the results.

Output (stdout, one JSON object; format ``xferlab-loadgen/1``)::

    {"format": "xferlab-loadgen/1", "host": "cli1", "workload": "login", "driver": "xferlab-ftp",
     "start_at": 1700000000.0, "late_s": 0.002,
     "result": {"workload": ..., "elapsed_s": ..., "bytes": ..., "ops": ...,
                "latencies_ms": [...], "errors": {...},
                "clients": [[bytes, seconds, ok, requests, max_rss, minor_faults, major_faults], ...],
                "client_cpu_user_s": ..., "client_cpu_system_s": ...,
                "client_runqueue_wait_s": ... (None when not measured),
                "client_steal_share": ... (None when not measured),
                "cpu_pressure_s": ... (None when not measured),
                "notes": [...], "started_at": ..., "ended_at": ...},
     "environment": {... runner.metrics.environment.snapshot() of this host ...}}

or, when nothing could be measured (runner.load.registry.LoadError), the driver cannot run
here (runner.load.registry.DriverUnavailable) or the arguments are wrong, ``{"format": ...,
"host": ..., "error": "..."}`` with exit status 3 (2 for usage errors). Units as PhaseResult:
bytes, seconds, milliseconds; ``started_at`` /
``ended_at`` / ``start_at`` are epoch seconds (``time.time()``), so the hosts' clocks
must be synchronised (NTP) for the combined elapsed time to be right.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict
from typing import Any

from runner.catalogue.workloads import WorkloadParams
from runner.load.registry import DEFAULT_DRIVER
from runner.load.result import ClientFigures, OpFigures, PhaseResult, SessionFigures
from runner.multihost import MultiHostError
from runner.multihost.combine import client_shares, host_params
from runner.multihost.inventory import Inventory

FORMAT = "xferlab-loadgen/1"
#: Longest wait for ``--start-at`` (s): a start time further ahead is a usage error.
MAX_WAIT_S = 300.0

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``xferlab loadgen`` (used by runner/cli.py)."""
    p.add_argument("--host", required=True, help="FTP server address")
    p.add_argument("--port", type=int, required=True, help="FTP control port")
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--workload", required=True, help="workload name (runner.catalogue.workloads)")
    p.add_argument("--driver", default=None,
                   help="what makes the load (runner.load.registry; default xferlab's own asyncio FTP client)")
    p.add_argument("--params", default="{}", help="workload parameters as JSON (WorkloadParams fields)")
    p.add_argument("--start-at", type=float, default=None,
                   help="epoch seconds at which to start the phase (sleeps until then; default now)")
    p.add_argument("--cpu", default=None, help="pin this load generator to CPUs, e.g. 1 or 0,1")
    p.add_argument("--name", default=None, help="host name to report (default: this host's name)")
    p.add_argument("--http-port", type=int, default=None, help="HTTP port of the server (HTTP workloads)")
    p.add_argument("--netns", default=None,
                   help="join this network namespace to connect (/proc/PID/ns/net of the server; needs root)")
    p.add_argument("--tls", default=None, help="FTPS: JSON of runner.load.target.TargetTls (mode, ca_file, "
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
    for key in ("op_figures", "buckets"):
        d[key] = {k: OpFigures(**v) for k, v in (d.get(key) or {}).items()}
    d["sessions"] = [SessionFigures(**x) for x in d.get("sessions") or []]
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

    from runner.catalogue.workloads import WORKLOADS, WorkloadParams
    from runner.load.registry import DEFAULT_DRIVER, DriverUnavailable, LoadError, get_driver
    from runner.load.target import Target, TargetTls
    from runner.metrics.environment import snapshot

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


def loadgen_args(workload: str, target: dict[str, Any], params: WorkloadParams, *, start_at: float, name: str,
                 cpu: list[int] | None = None, driver: str = DEFAULT_DRIVER) -> list[str]:
    """The arguments of ``xferlab loadgen`` (after the command) for one client host or
    process: ``target`` is ``{"host", "port", "user", "password"}`` and optionally
    ``"netns"`` (a namespace path to join, same machine only), ``"http_port"`` (HTTP workloads) and
    ``"tls"`` (FTPS: the fields of runner.load.target.TargetTls; the CA file must exist there)."""
    args = ["loadgen", "--host", target["host"], "--port", str(target["port"]), "--user", target["user"],
            "--password", target["password"], "--workload", workload,
            "--params", params.model_dump_json(), "--start-at", f"{start_at:.6f}", "--name", name]
    if cpu:
        args += ["--cpu", ",".join(map(str, cpu))]
    if driver != DEFAULT_DRIVER:  # the default is left implicit: an older xferlab there still understands
        args += ["--driver", driver]
    if target.get("netns"):
        args += ["--netns", str(target["netns"])]
    if target.get("http_port"):
        args += ["--http-port", str(target["http_port"])]
    if target.get("tls"):
        args += ["--tls", json.dumps(target["tls"])]
    return args


def collect_loadgens(procs: list[tuple[str, subprocess.Popen]], limit: float, *, what: str = "client host",
                     stdout_files: dict[str, Any] | None = None
                     ) -> tuple[list[dict[str, Any]], list[tuple[str, PhaseResult]]]:
    """Wait (at most ``limit`` s in all) for running ``xferlab loadgen`` processes
    ``[(name, Popen)]`` and read their JSON documents (from their stdout pipe, or from
    ``stdout_files[name]``, a text file their stdout went to). Returns ``(documents,
    [(name, PhaseResult), ...])`` of those that measured something; the others are
    logged and noted on the first result (``errors["host_failed"]``). Raises
    MultiHostError when none measured anything (the message has each one's cause)."""
    from runner.multihost.loadgen import result_from_json

    deadline = time.monotonic() + limit
    docs, results, problems = [], [], []
    for name, p in procs:
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate(timeout=30)
            problems.append(f"{name}: xferlab loadgen did not finish within {limit:g} s")
            continue
        if stdout_files and name in stdout_files:
            stdout_files[name].seek(0)
            out = stdout_files[name].read()
        doc = None
        for line in reversed(out.strip().splitlines()):
            if line.startswith("{"):
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError:
                    continue
                break
        if doc is None:
            problems.append(f"{name}: xferlab loadgen exited {p.returncode} without a result: "
                            f"{err.strip()[-1500:] or '(no stderr)'}")
            continue
        if "error" in doc:
            problems.append(f"{name}: {doc['error']}")
            continue
        docs.append(doc)
        results.append((name, result_from_json(doc["result"])))
    if not results:
        raise MultiHostError(f"no {what} measured anything: " + "; ".join(problems))
    for prob in problems:  # those that measured nothing: recorded on the combined result
        log.warning("%s", prob)
    if problems:
        results[0][1].notes.append(f"{what}s without a result: " + "; ".join(problems))
        results[0][1].errors["host_failed"] = results[0][1].errors.get("host_failed", 0) + len(problems)
    return docs, results


def run_loadgens(inv: Inventory, workload: str, target: dict[str, Any], params: WorkloadParams, *,
                 start_delay: float, cpu: list[int] | None = None, driver: str = DEFAULT_DRIVER
                 ) -> tuple[list[dict[str, Any]], list[tuple[str, PhaseResult]]]:
    """Run ``xferlab loadgen`` on every client host over SSH with one common start time
    ``start_delay`` s ahead, each running ``driver``, the clients split by
    runner.multihost.combine.client_shares. Returns
    ``(documents, [(host, PhaseResult), ...])`` for hosts that measured something.
    Raises MultiHostError when a host fails to report (the message has its stderr) or
    when no host measured anything."""
    shares = client_shares(workload, params.clients, len(inv.clients))
    start_at = time.time() + start_delay
    procs = []
    for index, (host, share) in enumerate(zip(inv.clients, shares)):
        if share == 0:
            continue
        args = loadgen_args(workload, target, host_params(workload, params, share, index), start_at=start_at,
                            name=host.name, cpu=cpu, driver=driver)
        procs.append((host.name, subprocess.Popen(host.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                  stdin=subprocess.DEVNULL, text=True)))
    return collect_loadgens(procs, start_delay + params.phase_timeout + 120.0)
