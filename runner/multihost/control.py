"""The control side of a multi-host cell (runs where ``xferlab run`` runs): start
``xferlab serve`` on the server host (:class:`RemoteServer`), ``xferlab loadgen`` on the
client hosts (:func:`run_loadgens`), and turn it all into one cell outcome
(:func:`run_remote_cell`, a runner.cell.CellRunner). See runner.multihost's docstring.
"""
from __future__ import annotations

import json
import logging
import queue
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Any

from runner.cell import CellOutcome, Reporter, crashed, failed, measured, memory_figures, skipped, warmup_params
from runner.drivers import DEFAULT_DRIVER, driver_record
from runner.drivers.result import PhaseResult
from runner.multihost import MultiHostError
from runner.multihost.combine import client_shares, combine, contribution_samples, host_params
from runner.multihost.inventory import Inventory, RemoteHost, inventory_for
from runner.pairing import pair_skip_reason
from runner.workloads import WORKLOADS, WorkloadParams

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.spec import CampaignSpec
    from runner.store.models import Cell

log = logging.getLogger(__name__)

#: Seconds to wait for ``xferlab serve`` to report its server ready.
SERVE_READY_TIMEOUT = 180.0
#: Seconds to wait for one answer of ``xferlab serve`` to a command.
SERVE_REPLY_TIMEOUT = 120.0


class RemoteServer:
    """The control side of one ``xferlab serve`` over SSH (see :func:`serve_main`)."""

    def __init__(self, host: RemoteHost, proc: subprocess.Popen):
        self.host = host
        self.proc = proc
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr: list[str] = []
        self.ready: dict[str, Any] = {}
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    @classmethod
    def start(cls, host: RemoteHost, server_spec: dict[str, Any], *, max_clients: int,
              cpu: list[int] | None = None, backend: str = "local") -> RemoteServer:
        """Start ``xferlab serve`` on ``host`` over SSH (not yet waiting for it)."""
        args = ["serve", "--server", json.dumps(server_spec), "--bind", host.address, "--backend", backend,
                "--max-clients", str(max_clients), "--name", host.name]
        if cpu:
            args += ["--cpu", ",".join(map(str, cpu))]
        proc = subprocess.Popen(host.argv(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, bufsize=1)
        return cls(host, proc)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())
            del self.stderr[:-50]

    def _why(self) -> str:
        tail = "\n".join(self.stderr[-15:])
        return f" (ssh/serve stderr: {tail})" if tail else ""

    def read(self, timeout: float) -> dict[str, Any]:
        """Next JSON line from serve. Raises MultiHostError on timeout or exit."""
        deadline = time.monotonic() + timeout
        for _ in range(10_000):  # skips stray non-JSON lines, bounded
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self.proc.wait(timeout=10)
                raise MultiHostError(f"{self.host.name}: xferlab serve exited ({self.proc.returncode}){self._why()}")
            line = line.strip()
            if line.startswith("{"):
                return json.loads(line)
        raise MultiHostError(f"{self.host.name}: no answer from xferlab serve within {timeout:g} s{self._why()}")

    def wait_ready(self, timeout: float = SERVE_READY_TIMEOUT) -> dict[str, Any]:
        """The ``ready`` / ``skipped`` / ``failed`` report."""
        self.ready = self.read(timeout)
        return self.ready

    def ask(self, command: str, timeout: float = SERVE_REPLY_TIMEOUT) -> dict[str, Any]:
        """Send one command line; return its JSON answer. Raises MultiHostError."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise MultiHostError(f"{self.host.name}: xferlab serve is gone ({exc}){self._why()}") from exc
        ans = self.read(timeout)
        if ans.get("event") in ("error", "failed"):
            raise MultiHostError(f"{self.host.name}: serve {command!r}: {ans.get('reason')}")
        return ans

    def stop(self) -> dict[str, Any] | None:
        """Stop the server; returns the ``stopped`` report (None if it was gone). Never raises."""
        report = None
        try:
            if self.proc.poll() is None:
                report = self.ask("stop", timeout=60)
        except (MultiHostError, ValueError) as exc:
            log.debug("serve stop: %s", exc)
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        return report



def loadgen_args(workload: str, target: dict[str, Any], params: WorkloadParams, *, start_at: float, name: str,
                 cpu: list[int] | None = None, driver: str = DEFAULT_DRIVER) -> list[str]:
    """The arguments of ``xferlab loadgen`` (after the command) for one client host or
    process: ``target`` is ``{"host", "port", "user", "password"}`` and optionally
    ``"netns"`` (a namespace path to join, same machine only), ``"http_port"`` (HTTP workloads) and
    ``"tls"`` (FTPS: the fields of runner.backends.base.TargetTls; the CA file must exist there)."""
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
    from runner.loadgen_remote import result_from_json

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
    for host, share in zip(inv.clients, shares):
        if share == 0:
            continue
        args = loadgen_args(workload, target, host_params(workload, params, share), start_at=start_at,
                            name=host.name, cpu=cpu, driver=driver)
        procs.append((host.name, subprocess.Popen(host.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                  stdin=subprocess.DEVNULL, text=True)))
    return collect_loadgens(procs, start_delay + params.phase_timeout + 120.0)


def run_remote_cell(cell: Cell, spec: CampaignSpec, backend: Backend | None = None, *,
                    reporter: Reporter | None = None) -> CellOutcome:
    """Run one cell across hosts (runner.multihost docstring; a runner.cell.CellRunner:
    ``backend`` is unused, the server host's ``xferlab serve`` starts the server with
    ``hosts.server_backend``) and return its outcome with the combined samples and
    the multi-host environment; never raises for server, SSH or load failures (they
    become a ``failed`` / ``skipped`` outcome naming the host and the cause)."""
    from runner.spec import ServerSpec

    hosts = spec.hosts
    if hosts is None:
        return failed("run_remote_cell: the spec has no hosts block")
    srv = ServerSpec.model_validate(cell.server_spec)
    params = WorkloadParams.model_validate(cell.params)
    why = pair_skip_reason(srv.name, cell.workload, params)
    if why is None and str(srv.variant.get("tls", "none")) != "none":
        why = "FTPS across hosts is not built yet (the campaign's certificates live on this machine only)"
    if why is not None:  # runner.pairing: e.g. an FTP workload on an HTTP-only server
        return skipped(why)
    server = None
    stopped = None
    try:
        inv = inventory_for(spec)
        if srv.name == "external":
            raise MultiHostError("server 'external' is not started by xferlab; give its address in a "
                                 "single-host campaign instead of hosts:")
        if reporter is not None:
            reporter.message(f"starting {srv.display()} on {inv.server.name}")
        server = RemoteServer.start(inv.server, srv.model_dump(mode="json"), max_clients=spec.max_clients,
                                    cpu=spec.pinning.server, backend=hosts.server_backend)
        ready = server.wait_ready()
        if ready.get("event") == "skipped":
            return skipped(str(ready.get("reason")))
        if ready.get("event") != "ready":
            raise MultiHostError(f"{inv.server.name}: {ready.get('reason') or ready}")
        build = dict(ready.get("build_info") or {})
        target = ready["target"]
        size = WORKLOADS[cell.workload].fixture_size(params)
        if size is not None:
            server.ask(f"fixture {size}")
        start_mem = server.ask("checkpoint start")
        if spec.warmup:
            wp = warmup_params(params)
            one = Inventory(inv.server, inv.clients[:1])
            run_loadgens(one, cell.workload, target, wp, start_delay=0.0, cpu=spec.pinning.client,
                         driver=spec.driver_of(params))
        cpu0 = server.ask("cpu")
        if reporter is not None:
            reporter.message(f"{cell.workload}: load from {', '.join(h.name for h in inv.clients)}")
        docs, results = run_loadgens(inv, cell.workload, target, params, start_delay=hosts.start_delay,
                                     cpu=spec.pinning.client, driver=spec.driver_of(params))
        cpu1 = server.ask("cpu")
        end_mem = server.ask("checkpoint end")
        alive = server.ask("alive").get("alive", True)
        stopped = server.stop()
        server = None
        result = combine(results)
        peak = (stopped.get("peak_uss"), stopped.get("peak_rss_minus_shared")) if stopped else None
        memory = memory_figures({name: (snap.get("uss"), snap.get("rss_minus_shared"))
                                 for name, snap in (("start", start_mem), ("end", end_mem))}, peak)
        server_cpu = None
        if cpu0.get("user") is not None and cpu1.get("user") is not None:
            server_cpu = (max(0.0, cpu1["user"] - cpu0["user"]), max(0.0, cpu1["system"] - cpu0["system"]))
        env = dict(ready.get("environment") or {})
        env["backend"] = f"{env.get('backend', hosts.server_backend)}+multihost"
        env["driver"] = driver_record(spec.driver_of(params))
        env["hosts"] = {"server": inv.server.name,
                        "clients": {d.get("host"): d.get("environment") for d in docs}}
        return measured(result, build_info=build, memory=memory, server_cpu=server_cpu,
                        memory_timeline=(stopped or {}).get("timeline"),
                        extra_samples=contribution_samples(docs, results), server_alive=alive,
                        server_where=inv.server.name, summary_suffix=f" [{len(results)} client hosts]",
                        environment=env)
    except MultiHostError as exc:
        return failed(str(exc))
    except Exception as exc:  # a bug or an unexpected failure: record it, keep the campaign going
        return crashed(exc, cell.id)
    finally:
        if server is not None:
            server.stop()
