"""Driver ``h2load``: the HTTP workloads made by h2load (Debian package
``nghttp2-client``) speaking HTTP/1.1 (``--h1``), a compiled benchmark tool.

How it runs: ``h2load --h1 -c N -t T -D <ms>ms -m 1 [-d BODY -H "Content-Type: ..."] URL``
(T = min(CPUs, N); ``-m 1``: one request at a time per connection, as gobench).

What it can run, and why: h2load sends one fixed request
per URI and cycles through its URI list per client, and ``-d FILE`` always makes the
request a POST, so it cannot give every PUT a name of its own (clients would overwrite
each other's files and the stored-file check would fail). It therefore runs

* ``http_upload`` with ``method: post`` only (``POST /uploads/``, the server names
  the files; nginx and tpd have no POST, so h2load cannot upload to them),
* ``http_download`` (``GET /xferlab-<size>.bin``),

always with keep-alive (``keepalive: false`` is refused too: h2load has no
connection-per-request mode). :meth:`H2loadDriver.refuses` says so, and the campaign
spec rejects such a pairing before anything runs.

Counting (only requests h2load counts as ``done``: its ``status codes`` line also counts
responses whose body was still coming at the stop): ``successful`` = the 2xx among
``succeeded`` (h2load's success is 2xx or 3xx); ``non_2xx`` = ``{"3xx": succeeded - 2xx,
"4xx": failed - errored}`` (``"5xx"``, or ``"4xx-5xx"`` when both classes occurred: h2load
gives status classes only, not which completed); ``network_failed`` = ``errored``
(h2load's failures other than an HTTP status; its ``timeout`` count is a subset). When no
request even started, every client failed to connect: ``network_failed`` = N (kind
``connect``). ``bytes_read`` = traffic total; h2load reports no bytes sent, so
``bytes_written`` counts the request bodies only. Latency: h2load 1.52 prints no
percentiles, only min/max/mean of ``time for request`` (``latency_percentiles_ms`` keys
``min``, ``mean``, ``max``). No per-connection figures (``clients`` stays empty).
"""
from __future__ import annotations

import os
import re
import tempfile
from typing import TYPE_CHECKING

from runner.load.base import Checkpoint, Progress
from runner.load.result import PhaseResult
from runner.load.tools.child import ChildRun, HttpToolDriver, body_file, prepare_fixture, run_child, tool_version

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.target import Target

_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


def parse_h2load(text: str) -> dict[str, float]:
    """h2load's summary as numbers: ``elapsed_s`` (``finished in``), ``total``,
    ``started``, ``done``, ``succeeded``, ``failed``, ``errored``, ``timeout``, ``2xx`` ..
    ``5xx``, ``bytes_read`` (traffic total), ``min``/``max``/``mean`` of time for request (ms).

    Raises:
        ValueError: no ``finished in`` / ``requests:`` / ``status codes:`` lines.
    """
    fin = re.search(r"^finished in ([\d.]+)(us|ms|s|m|h),", text, re.M)
    req = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
                    r"(\d+) errored, (\d+) timeout", text, re.M)
    st = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text, re.M)
    if fin is None or req is None or st is None:
        raise ValueError("h2load output has no 'finished in', 'requests:' and 'status codes:' lines")
    d: dict[str, float] = {"elapsed_s": float(fin[1]) * _MS[fin[2]] / 1e3}
    d.update(zip(("total", "started", "done", "succeeded", "failed", "errored", "timeout"),
                 (int(x) for x in req.groups())))
    d.update(zip(("2xx", "3xx", "4xx", "5xx"), (int(x) for x in st.groups())))
    tr = re.search(r"^traffic: \S+ \((\d+)\) total", text, re.M)
    d["bytes_read"] = int(tr[1]) if tr else 0
    lat = re.search(r"^time for request:\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)\s+([\d.]+)(us|ms|s)", text, re.M)
    if lat:
        d.update(min=float(lat[1]) * _MS[lat[2]], max=float(lat[3]) * _MS[lat[4]], mean=float(lat[5]) * _MS[lat[6]])
    return d


def h2load_result(workload: str, params: WorkloadParams, run: ChildRun, notes: list[str]) -> PhaseResult:
    """The PhaseResult of one h2load run (module docstring for the counting).

    Raises:
        LoadError: h2load's output has no summary (it did not run).
    """
    try:
        d = parse_h2load(run.stdout)
    except ValueError as e:
        raise run.no_result("h2load", e) from e
    ok = int(min(d["2xx"], d["succeeded"]))  # status codes also count responses whose body was still coming
    non = {"3xx": int(d["succeeded"]) - ok}
    http_failed = int(d["failed"] - d["errored"])
    non["4xx" if not d["5xx"] else "5xx" if not d["4xx"] else "4xx-5xx"] = http_failed
    non = {k: v for k, v in non.items() if v > 0}
    errors = {"errored": int(d["errored"])} if d["errored"] else {}
    if d["started"] == 0:
        errors = {"connect": params.clients}
        notes.append("h2load: no request started: no client could connect")
    elif d["started"] - d["done"] > params.clients:
        notes.append(f"h2load: {int(d['started'] - d['done'])} requests started but not done (in flight at the stop, "
                     "or lost with their connection: h2load does not tell)")
    failed = sum(errors.values())
    upload = workload == "http_upload"
    pct: dict[str, float] = {k: d[k] for k in ("min", "mean", "max") if k in d}
    return PhaseResult(
        workload=workload, elapsed_s=d["elapsed_s"], bytes=ok * (params.body_size if upload else params.file_size),
        ops=ok, errors=errors, requests=ok + sum(non.values()) + failed, successful=ok, network_failed=failed,
        non_2xx=non, bytes_read=int(d["bytes_read"]),
        bytes_written=int(d["done"]) * params.body_size if upload else 0, latency_percentiles_ms=pct, notes=notes,
        unfinished=int(d["started"] - d["done"]), **run.client_figures())


class H2loadDriver(HttpToolDriver):
    """h2load as a driver (implements runner.load.base.Driver; module docstring); its
    check: ``apt-get install nghttp2-client`` (runner.load.tools.child.HttpToolDriver)."""

    name = "h2load"
    package = "nghttp2-client"

    def version(self) -> str:
        """h2load's version line, e.g. ``h2load nghttp2/1.52.0``."""
        return tool_version(["h2load", "--version"])

    def refuses(self, workload: str, params: WorkloadParams) -> str | None:
        """Why h2load cannot run ``workload`` with ``params`` (PUT uploads, no keep-alive),
        or None when it can."""
        if workload == "http_upload" and params.method == "put":
            return ("h2load cannot give each PUT its own name (-d always POSTs one fixed URI): use method: post "
                    "(servers with POST) or driver wrk / xferlab-http")
        if not params.keepalive:
            return "h2load has no connection-per-request mode: use keepalive: true or driver wrk / xferlab-http"
        return None

    def run(self, workload: str, target: Target, params: WorkloadParams, *,
            checkpoint: Checkpoint | None = None, progress: Progress | None = None) -> PhaseResult:
        """One phase of ``workload`` with h2load (module docstring), inside ``target.netns`` when set.

        Raises:
            ValueError: not an HTTP workload, parameters h2load refuses (:meth:`refuses`),
                or a target without an HTTP port.
            DriverUnavailable: h2load is not installed.
            LoadError: h2load measured nothing, or the namespace cannot be joined.
        """
        exe = self.executable(workload, target, params)
        notes: list[str] = []
        threads = min(os.cpu_count() or 1, params.clients)
        base = [exe, "--h1", "-c", str(params.clients), "-t", str(threads),
                "-D", f"{max(1, round(params.duration * 1000))}ms", "-m", "1"]
        with tempfile.TemporaryDirectory(prefix="xferlab-h2load-") as tmp:
            if workload == "http_upload":
                argv = base + ["-d", body_file(tmp, params.body_size), "-H", "Content-Type: application/octet-stream",
                               f"http://{target.host}:{target.http_port}/uploads/"]
            else:
                name = prepare_fixture(target, params.file_size, notes)
                argv = base + [f"http://{target.host}:{target.http_port}/{name}"]
            if progress is not None:
                progress(f"h2load: {params.clients} clients, {threads} threads, {params.duration:g} s")
            run = run_child(argv, netns=target.netns, timeout_s=params.duration + params.op_timeout + 30,
                            checkpoint=checkpoint, half_s=params.duration / 2, folder=tmp)
        return h2load_result(workload, params, run, notes)


DRIVER = H2loadDriver()
