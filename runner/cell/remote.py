"""The control side of a multi-host cell (runs where ``xferlab run`` runs): start
``xferlab serve`` on the server host (:class:`RemoteServer`), ``xferlab loadgen`` on the
client hosts (:func:`run_loadgens`), and turn it all into one cell outcome
(:func:`run_remote_cell`, a runner.cell.outcome.CellRunner). See runner.multihost's docstring.
"""
from __future__ import annotations

import json
import logging
import queue
import subprocess
import threading
import time
from typing import TYPE_CHECKING, Any

from runner.catalogue.pairing import pair_skip_reason
from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.cell.outcome import CellOutcome, Reporter, crashed, failed, measured, memory_figures, skipped, warmup_params
from runner.load.registry import driver_record
from runner.metrics.profile_data import profile_from_dict
from runner.multihost import MultiHostError
from runner.multihost.combine import combine, contribution_samples
from runner.multihost.inventory import Inventory, RemoteHost, inventory_for
from runner.multihost.loadgen import run_loadgens

if TYPE_CHECKING:
    from runner.backends.base import Backend
    from runner.spec.model import CampaignSpec
    from runner.store.models import Cell

log = logging.getLogger(__name__)

#: Seconds to wait for ``xferlab serve`` to report its server ready.
SERVE_READY_TIMEOUT = 180.0
#: Seconds to wait for one answer of ``xferlab serve`` to a command.
SERVE_REPLY_TIMEOUT = 120.0
#: Seconds to wait for the profile of a phase (``perf script`` may take up to 300 s).
PROFILE_REPLY_TIMEOUT = 420.0


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



def run_remote_cell(cell: Cell, spec: CampaignSpec, backend: Backend | None = None, *,
                    reporter: Reporter | None = None) -> CellOutcome:
    """Run one cell across hosts (runner.multihost docstring; a runner.cell.outcome.CellRunner:
    ``backend`` is unused, the server host's ``xferlab serve`` starts the server with
    ``hosts.server_backend``) and return its outcome with the combined samples and
    the multi-host environment; never raises for server, SSH or load failures (they
    become a ``failed`` / ``skipped`` outcome naming the host and the cause). The
    profiled repeat of a cell whose spec asks for a profile (runner.spec.model.expand) is
    profiled on the server host by ``xferlab serve`` over the whole phase (the load
    generators run elsewhere and do not mark a measured span)."""
    from runner.spec.model import ServerSpec

    hosts = spec.hosts
    if hosts is None:
        return failed("run_remote_cell: the spec has no hosts block")
    srv = ServerSpec.model_validate(cell.server_spec)
    params = WorkloadParams.model_validate(cell.params)
    why = pair_skip_reason(srv.name, cell.workload, params)
    if why is None and str(srv.variant.get("tls", "none")) != "none":
        why = "FTPS across hosts is not built yet (the campaign's certificates live on this machine only)"
    if why is not None:  # runner.catalogue.pairing: e.g. an FTP workload on an HTTP-only server
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
                         driver=spec.driver_of(params, cell.workload))
        cpu0 = server.ask("cpu")
        wanted = spec.profile_of(srv, cell.workload, params) if cell.profiled else None
        profiling = wanted is not None and bool(server.ask(f"profile {wanted.model_dump_json()}").get("started"))
        if reporter is not None:
            reporter.message(f"{cell.workload}: load from {', '.join(h.name for h in inv.clients)}")
        docs, results = run_loadgens(inv, cell.workload, target, params, start_delay=hosts.start_delay,
                                     cpu=spec.pinning.client, driver=spec.driver_of(params, cell.workload))
        cpu1 = server.ask("cpu")
        profile = None
        if profiling:
            got = server.ask("profile-stop", timeout=PROFILE_REPLY_TIMEOUT).get("profile")
            try:
                profile = profile_from_dict(got) if got is not None else None
            except ValueError as exc:
                log.warning("cell %s: the profile from %s is not readable: %s", cell.id, inv.server.name, exc)
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
        env["driver"] = driver_record(spec.driver_of(params, cell.workload))
        env["hosts"] = {"server": inv.server.name,
                        "clients": {d.get("host"): d.get("environment") for d in docs}}
        outcome = measured(result, build_info=build, memory=memory, server_cpu=server_cpu,
                           memory_timeline=(stopped or {}).get("timeline"),
                           extra_samples=contribution_samples(docs, results), server_alive=alive,
                           server_where=inv.server.name, summary_suffix=f" [{len(results)} client hosts]",
                           environment=env)
        outcome.profile = profile
        return outcome
    except MultiHostError as exc:
        return failed(str(exc))
    except Exception as exc:  # a bug or an unexpected failure: record it, keep the campaign going
        return crashed(exc, cell.id)
    finally:
        if server is not None:
            server.stop()
