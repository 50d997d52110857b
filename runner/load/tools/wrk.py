"""Driver ``wrk``: the HTTP workloads made by wrk (Debian package ``wrk``), a compiled
HTTP/1.1 benchmark tool, so the client is never what is measured.

How it runs (``wrk -t T -c N -d Ds --timeout Ss --latency -s SCRIPT URL``, T = min(CPUs,
N)): the Lua script xferlab writes into a temporary folder sets the method and the
body, and

* ``http_upload`` with ``method: put`` gives every request its own name
  (``/uploads/<random prefix>t<thread>-<seq>``, from wrk's per-request ``request()``
  hook); ``method: post`` sends one pre-built ``POST /uploads/`` (wrk's fast path);
* ``http_download`` sends one pre-built ``GET /xferlab-<size>.bin``;
* ``done()`` prints one ``xferlab-wrk:`` line with wrk's exact counters (requests, bytes
  read, bytes sent, socket errors, duration, latency p50/p90/p95/p99/max in µs).

wrk runs whole seconds: ``duration`` is rounded up. Counting (as wrk counts):
``successful`` = responses - ``Non-2xx or 3xx responses`` (wrk counts statuses over 399
there, so a 3xx counts as successful), ``non_2xx`` = ``{"4xx-5xx": n}`` (wrk does not tell
the statuses apart), ``network_failed`` = the socket errors (connect, read, write,
timeout). wrk has no per-connection figures: ``clients`` stays empty. Its CPU and peak
memory come from wait4 rusage (runner.load.tools.child).
"""
from __future__ import annotations

import math
import os
import re
import secrets
import tempfile
from typing import TYPE_CHECKING

from runner.load.base import Checkpoint, Progress
from runner.load.result import PhaseResult
from runner.load.tools.child import ChildRun, HttpToolDriver, body_file, prepare_fixture, run_child, tool_version

if TYPE_CHECKING:
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.target import Target

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_BYTES = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}

_SCRIPT = """-- written by xferlab (runner/load/tools/wrk.py)
wrk.method = "{method}"
{body}wrk.headers["Content-Type"] = "application/octet-stream"
{close}local threads = {{}}
local counter = 0
written = 0
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
{request}function done(summary, latency, requests)
  local w = 0
  for _, t in ipairs(threads) do w = w + (t:get("written") or 0) end
  if w == 0 then w = summary.requests * #wrk.format() end
  local e = summary.errors
  io.write(string.format("xferlab-wrk: requests=%d bytes=%d written=%d connect=%d read=%d write=%d "
    .. "status=%d timeout=%d duration_us=%d p50=%d p90=%d p95=%d p99=%d max=%d\\n",
    summary.requests, summary.bytes, w, e.connect, e.read, e.write, e.status, e.timeout, summary.duration,
    latency:percentile(50), latency:percentile(90), latency:percentile(95), latency:percentile(99), latency.max))
end
"""
_REQUEST = """function request()
  counter = counter + 1
  local r = wrk.format(nil, "/uploads/{prefix}t" .. tid .. "-" .. counter)
  written = written + #r
  return r
end
"""


def lua_script(workload: str, params: WorkloadParams, body_path: str | None, prefix: str) -> str:
    """The Lua script of one phase (module docstring). ``body_path``: the upload body
    file (uploads), ``prefix``: the per-phase random part of PUT names."""
    upload = workload == "http_upload"
    method = ("PUT" if params.method == "put" else "POST") if upload else "GET"
    body = f'local f = assert(io.open("{body_path}", "rb"))\nwrk.body = f:read("*a")\nf:close()\n' if upload else ""
    close = "" if params.keepalive else 'wrk.headers["Connection"] = "close"\n'
    request = _REQUEST.format(prefix=prefix) if upload and params.method == "put" else ""
    return _SCRIPT.format(method=method, body=body, close=close, request=request)


def parse_wrk(text: str) -> dict[str, float]:
    """wrk's output as numbers: ``requests``, ``elapsed_s``, ``bytes_read``, ``non_2xx``,
    ``connect``/``read``/``write``/``timeout`` (socket errors), latency percentiles in ms
    (``p50``, ``p75``, ``p90``, ``p99`` from ``--latency``); the ``xferlab-wrk:`` line, when
    present, overrides them with exact figures and adds ``written``, ``p95`` and ``max``.

    Raises:
        ValueError: no ``N requests in T, B read`` line (wrk did not run a test).
    """
    m = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m|h), ([\d.]+)(B|KB|MB|GB|TB) read", text)
    if m is None:
        raise ValueError("wrk output has no 'N requests in T, B read' line")
    d: dict[str, float] = {"requests": int(m[1]), "elapsed_s": float(m[2]) * _UNITS[m[3]] / 1e3,
                           "bytes_read": float(m[4]) * _BYTES[m[5]], "non_2xx": 0,
                           "connect": 0, "read": 0, "write": 0, "timeout": 0}
    if n := re.search(r"Non-2xx or 3xx responses: (\d+)", text):
        d["non_2xx"] = int(n[1])
    if s := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text):
        d.update(connect=int(s[1]), read=int(s[2]), write=int(s[3]), timeout=int(s[4]))
    dist = text.split("Latency Distribution", 1)
    if len(dist) == 2:
        for q, v, u in re.findall(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s|m)\s*$", dist[1], re.M):
            d[f"p{q}"] = float(v) * _UNITS[u]
    if x := re.search(r"^xferlab-wrk: (.*)$", text, re.M):
        f = {k: int(v) for k, v in (kv.split("=") for kv in x[1].split())}
        d.update(requests=f["requests"], bytes_read=f["bytes"], written=f["written"], non_2xx=f["status"],
                 connect=f["connect"], read=f["read"], write=f["write"], timeout=f["timeout"],
                 elapsed_s=f["duration_us"] / 1e6)
        d.update({k: f[k] / 1e3 for k in ("p50", "p90", "p95", "p99", "max")})
    return d


def wrk_result(workload: str, params: WorkloadParams, run: ChildRun, notes: list[str]) -> PhaseResult:
    """The PhaseResult of one wrk run (module docstring for the counting).

    wrk stops at its first failed connect (``unable to connect to ...``): that gives one
    ``network_failed`` request of kind ``refused`` (or ``connect``), not an error.

    Raises:
        LoadError: wrk's output has no result (it did not run a test).
    """
    text = run.stdout + run.stderr
    if "unable to connect" in text:  # wrk gives up at the first failed connect
        kind = "refused" if "refused" in text else "connect"
        return PhaseResult(workload=workload, elapsed_s=run.wall_s, requests=1, network_failed=1, errors={kind: 1},
                           notes=notes + ["wrk: " + text.strip().splitlines()[-1]], client_cpu_user_s=run.user_s,
                           client_cpu_system_s=run.system_s, driver_max_rss=run.max_rss)
    try:
        d = parse_wrk(run.stdout)
    except ValueError as e:
        raise run.no_result("wrk", e) from e
    errors = {k: int(d[k]) for k in ("connect", "read", "write", "timeout") if d[k]}
    failed = sum(errors.values())
    ok = int(d["requests"] - d["non_2xx"])
    per = params.body_size if workload == "http_upload" else params.file_size
    pct: dict[str, float] = {k: d[k] for k in ("p50", "p75", "p90", "p95", "p99", "max") if k in d}
    if "written" not in d:
        notes.append("wrk: no xferlab-wrk line; bytes written unknown, percentiles from --latency")
    return PhaseResult(
        workload=workload, elapsed_s=d["elapsed_s"], bytes=ok * per, ops=ok, errors=errors,
        requests=int(d["requests"]) + failed, successful=ok, network_failed=failed,
        non_2xx={"4xx-5xx": int(d["non_2xx"])} if d["non_2xx"] else {}, bytes_read=int(d["bytes_read"]),
        bytes_written=int(d.get("written", 0)), latency_percentiles_ms=pct, notes=notes, unfinished=None,
        **run.client_figures())


class WrkDriver(HttpToolDriver):
    """wrk as a driver (implements runner.load.base.Driver; module docstring); its check:
    ``apt-get install wrk`` (runner.load.tools.child.HttpToolDriver). It runs every HTTP
    workload with any parameters (``refuses`` is always None)."""

    name = "wrk"
    package = "wrk"

    def version(self) -> str:
        """wrk's own version line, e.g. ``wrk debian/4.1.0-3+b2 [epoll] ...``."""
        return tool_version(["wrk", "-v"]).split(" Copyright")[0]

    def run(self, workload: str, target: Target, params: WorkloadParams, *,
            checkpoint: Checkpoint | None = None, progress: Progress | None = None) -> PhaseResult:
        """One phase of ``workload`` with wrk (module docstring), inside ``target.netns``
        when set.

        Raises:
            ValueError: not an HTTP workload, or the target has no HTTP port.
            DriverUnavailable: wrk is not installed.
            LoadError: wrk measured nothing (its output has no result), or the
                namespace cannot be joined.
        """
        exe = self.executable(workload, target, params)
        notes: list[str] = []
        seconds = max(1, math.ceil(params.duration))
        if seconds != params.duration:
            notes.append(f"wrk runs whole seconds: duration {params.duration:g} s run as {seconds} s")
        path = "/uploads/"  # POST's path; PUT names come from the script
        if workload == "http_download":
            path = "/" + prepare_fixture(target, params.file_size, notes)
        with tempfile.TemporaryDirectory(prefix="xferlab-wrk-") as tmp:
            body = body_file(tmp, params.body_size) if workload == "http_upload" else None
            script = os.path.join(tmp, "phase.lua")
            with open(script, "w") as f:
                f.write(lua_script(workload, params, body, secrets.token_hex(4)))
            threads = min(os.cpu_count() or 1, params.clients)
            argv = [exe, "-t", str(threads), "-c", str(params.clients), "-d", f"{seconds}s",
                    "--timeout", f"{max(1, math.ceil(params.op_timeout))}s", "--latency", "-s", script,
                    f"http://{target.host}:{target.http_port}{path}"]
            if progress is not None:
                progress(f"wrk: {params.clients} connections, {threads} threads, {seconds} s")
            run = run_child(argv, netns=target.netns, timeout_s=seconds + params.op_timeout + 30,
                            checkpoint=checkpoint, half_s=seconds / 2, folder=tmp)
        return wrk_result(workload, params, run, notes)


DRIVER = WrkDriver()
