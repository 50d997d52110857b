"""Campaigns across hosts: the server on a ``servers`` host, load from every ``clients`` host.

A campaign spec with a ``hosts`` block (runner.spec.HostsSpec), or ``xferlab run SPEC
--inventory INV``, runs each cell like this (docs/multi-host.md):

1. The hosts come from the Ansible inventory (``ansible-inventory --list``): groups
   ``servers`` and ``clients``; per host ``ansible_host``, ``ansible_user``,
   ``ansible_port``, ``ansible_ssh_private_key_file``, ``ansible_ssh_common_args``,
   ``ansible_ssh_extra_args``, and xferlab's own ``xferlab_command`` (path of ``xferlab``
   there, default ``xferlab``), ``xferlab_env`` (environment variables for it) and
   ``xferlab_address`` (the address the server binds / clients connect to; default
   ``ansible_host``).
2. ``xferlab serve`` (:func:`serve_main`) starts over SSH on the server host: it starts
   the server with the spec's backend bound to the server's address, samples its
   process tree's memory and CPU *on that host* (runner.metrics.sampler.TreeSampler),
   and answers one-line commands on stdin (``fixture SIZE``, ``checkpoint NAME``,
   ``cpu``, ``alive``, ``stop``) with one JSON line each. EOF (the SSH connection
   closing) stops the server too.
3. ``xferlab loadgen`` (runner.loadgen_remote) starts over SSH on every client host with
   a common ``--start-at`` (``hosts.start_delay`` seconds ahead); the N clients of the
   workload are split over the hosts (150 + 150 for 300); single-stream workloads run
   one stream per host.
4. The JSON results are combined (:func:`combine`) and stored as one cell with the usual
   sample rows (runner.measure.phase_samples), plus one ``client_host`` sample per
   client host with that host's own figures in ``raw``.

Combining, per docs/methodology.md: bytes, ops and errors are summed; latencies are
concatenated (the percentiles are of the merged distribution); per-client figures are
concatenated, so fairness (Jain's index) covers the clients of every host; client CPU
is summed over hosts. For concurrent workloads ``elapsed`` is the earliest measured
start to the latest measured end over all hosts (wall clocks: the hosts' clocks must be
NTP-synchronised); for single-stream workloads the throughput is the sum of the hosts'
throughputs and ``elapsed`` is set so that bytes / elapsed equals it.

The environment of a multi-host cell is the server host's snapshot (kernel, CPU,
sysctls, the tuning record of ansible/roles/tuning) with ``backend`` ``<name>+multihost``
and ``hosts``: ``{"server": NAME, "clients": {NAME: snapshot}}``.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import queue
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.load.result import PhaseResult

log = logging.getLogger(__name__)

#: Workloads with one transfer stream per load generator (elapsed = sum of spans).
SINGLE_STREAM = ("stor", "retr", "stor_idle", "retr_idle")
#: Seconds to wait for ``xferlab serve`` to report its server ready.
SERVE_READY_TIMEOUT = 180.0
#: Seconds to wait for one answer of ``xferlab serve`` to a command.
SERVE_REPLY_TIMEOUT = 120.0
SERVE_FORMAT = "xferlab-serve/1"


class MultiHostError(Exception):
    """The multi-host setup is wrong or a remote step failed; the message names the
    host, the command and the cause."""


# ----------------------------------------------------------------------------- inventory


@dataclass
class RemoteHost:
    """One inventory host as the runner reaches it over SSH.

    Attributes:
        name: inventory name (e.g. ``cli1``).
        address: address the server binds / the clients connect to (``xferlab_address``
            or ``ansible_host``).
        ssh: ssh argv up to and including ``user@host`` (no remote command).
        command: the remote ``xferlab`` command (``xferlab_command``).
        env: environment variables set for it (``xferlab_env``).
    """

    name: str
    address: str
    ssh: list[str]
    command: str = "xferlab"
    env: dict[str, str] = field(default_factory=dict)

    def argv(self, *args: str) -> list[str]:
        """Local argv that runs ``xferlab ARGS...`` on this host over SSH."""
        remote = ["env", *(f"{k}={v}" for k, v in sorted(self.env.items())), self.command, *args]
        return [*self.ssh, shlex.join(remote)]


@dataclass
class Inventory:
    """The hosts of one multi-host campaign: one server host, one or more client hosts."""

    server: RemoteHost
    clients: list[RemoteHost]


def _ansible_inventory() -> str:
    for cand in (Path(sys.executable).parent / "ansible-inventory", shutil.which("ansible-inventory")):
        if cand and Path(cand).exists():
            return str(cand)
    raise MultiHostError("ansible-inventory not found (pip install ansible-core): it reads the multi-host inventory")


def _remote_host(name: str, hv: dict[str, Any]) -> RemoteHost:
    addr = str(hv.get("ansible_host") or name)
    ssh = ["ssh", "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=15", "-o", "ServerAliveInterval=15"]
    if hv.get("ansible_port"):
        ssh += ["-p", str(hv["ansible_port"])]
    if hv.get("ansible_ssh_private_key_file"):
        ssh += ["-i", os.path.expanduser(str(hv["ansible_ssh_private_key_file"]))]
    for key in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        if hv.get(key):
            ssh += shlex.split(str(hv[key]))
    user = hv.get("ansible_user")
    ssh.append(f"{user}@{addr}" if user else addr)
    env = hv.get("xferlab_env") or {}
    if not isinstance(env, dict):
        raise MultiHostError(f"host {name}: xferlab_env must be a mapping of environment variables, got {env!r}")
    return RemoteHost(name=name, address=str(hv.get("xferlab_address") or addr), ssh=ssh,
                      command=str(hv.get("xferlab_command") or "xferlab"),
                      env={str(k): str(v) for k, v in env.items()})


def load_inventory(path: str | Path, *, server: str | None = None, clients: list[str] | None = None) -> Inventory:
    """Read an Ansible inventory (any format ``ansible-inventory`` reads).

    Args:
        path: inventory file.
        server: host of group ``servers`` to run the server on (default: the first).
        clients: hosts of group ``clients`` to run load from (default: all of them).

    Raises:
        MultiHostError: ansible-inventory missing or failing, a group empty, a named
            host not in its group.
    """
    p = Path(path)
    if not p.exists():
        raise MultiHostError(f"inventory {p} not found")
    r = subprocess.run([_ansible_inventory(), "-i", str(p), "--list"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise MultiHostError(f"ansible-inventory -i {p} --list failed: {r.stderr.strip()[-2000:]}")
    data = json.loads(r.stdout)
    hostvars = data.get("_meta", {}).get("hostvars", {})

    def members(group: str) -> list[str]:
        out: list[str] = []
        todo = [group]
        for _ in range(100):  # groups nest; bounded walk
            if not todo:
                break
            g = data.get(todo.pop(0), {})
            out += [h for h in g.get("hosts", []) if h not in out]
            todo += g.get("children", [])
        return out

    srv_hosts, cli_hosts = members("servers"), members("clients")
    if not srv_hosts:
        raise MultiHostError(f"inventory {p}: group 'servers' has no host")
    if not cli_hosts:
        raise MultiHostError(f"inventory {p}: group 'clients' has no host")
    s = server or srv_hosts[0]
    if s not in srv_hosts:
        raise MultiHostError(f"inventory {p}: server host {s!r} is not in group 'servers' ({', '.join(srv_hosts)})")
    cl = clients or cli_hosts
    bad = [c for c in cl if c not in cli_hosts]
    if bad:
        raise MultiHostError(f"inventory {p}: client hosts {bad} are not in group 'clients' ({', '.join(cli_hosts)})")
    return Inventory(_remote_host(s, hostvars.get(s, {})), [_remote_host(c, hostvars.get(c, {})) for c in cl])


# ----------------------------------------------------------------------------- xferlab serve (server side)


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``xferlab serve`` (used by runner/cli.py)."""
    p.add_argument("--server", required=True, help="server spec as JSON (runner.spec.ServerSpec)")
    p.add_argument("--bind", required=True, help="address the server listens on")
    p.add_argument("--backend", default="local", choices=("local", "docker"),
                   help="how to start the server on this host (local: child process; docker: a container "
                        "with host networking, listening on --bind)")
    p.add_argument("--max-clients", type=int, default=2000)
    p.add_argument("--cpu", default=None, help="pin the server to CPUs, e.g. 0 or 0,1")
    p.add_argument("--max-seconds", type=float, default=6 * 3600.0,
                   help="stop the server after this long even if never told to (bound)")
    p.add_argument("--name", default=None, help="host name to report")


def _say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":"), default=str) + "\n")
    sys.stdout.flush()


async def _serve_fixture(target: Any, size: int) -> str:
    """The RETR fixture of ``size`` bytes in the server's home: written directly when the
    home is a local path (local backend), else uploaded by STOR over one session
    (docker backend). Returns its name."""
    from runner.load.fixtures import ensure_server_file
    from runner.load.ftp import FTPSession

    if target.root is not None:
        return await ensure_server_file(None, target.root, size)
    session = FTPSession(target.host, target.port, op_timeout=120)
    try:
        await session.connect()
        await session.login(target.user, target.password)
        await session.type_binary()
        return await ensure_server_file(session, None, size)
    finally:
        session.close()


def serve_main(args: argparse.Namespace) -> int:
    """Run ``xferlab serve``: start one server bound to ``--bind`` and report on stdout,
    one JSON object a line (format ``xferlab-serve/1``):

    * ``{"event": "ready", "target": {host, port, user, password}, "pid", "build_info",
      "environment"}`` once the server answers a login; or ``{"event": "skipped"|"failed",
      "reason"}`` and exit status 0 / 1.
    * then per stdin line: ``fixture SIZE`` -> ``{"event": "fixture", "name"}`` (the RETR
      fixture written into the server's home); ``checkpoint NAME`` -> ``{"event":
      "checkpoint", "name", "uss", "rss_minus_shared"}`` (bytes, whole tree); ``cpu`` ->
      ``{"event": "cpu", "user", "system"}`` (s); ``alive`` -> ``{"event": "alive",
      "alive"}``; ``stop`` or EOF -> ``{"event": "stopped", "peak_uss",
      "peak_rss_minus_shared", "timeline", "alive"}`` and exit 0.

    The server and the sampler stop when this process ends (a local server gets SIGKILL
    if it dies: PR_SET_PDEATHSIG; a container of a killed ``serve`` is removed by the next
    docker backend on that host, see runner.backends.docker.reap_orphans). Returns the
    exit status."""
    import asyncio
    import signal
    import socket

    from runner.backends import local
    from runner.backends.base import ServerFailed, ServerSkipped
    from runner.metrics.environment import snapshot
    from runner.metrics.sampler import TreeSampler
    from runner.spec import ServerSpec

    name = args.name or socket.gethostname()
    try:
        srv = ServerSpec.model_validate(json.loads(args.server))
    except ValueError as exc:
        _say({"format": SERVE_FORMAT, "event": "failed", "reason": f"--server: {exc}"})
        return 2
    if args.backend == "docker":
        from runner.backends.docker import DockerBackend

        try:
            backend: Any = DockerBackend(network="host", bind=args.bind)
        except RuntimeError as exc:
            _say({"format": SERVE_FORMAT, "event": "skipped", "reason": str(exc)})
            return 0
    else:
        # The local backend's recipes bind to runner.backends.local.HOST (127.0.0.1); this
        # process exists only to serve one server, so it points that at --bind.
        local.HOST = args.bind
        backend = local.LocalBackend()
    req = srv.request(args.max_clients)
    if args.backend == "docker" and req.variant.get("network", "host") != "host":
        _say({"format": SERVE_FORMAT, "event": "skipped",
              "reason": f"{req.label}: across hosts the server container uses host networking "
                        f"(variant network={req.variant['network']!r} cannot be reached from the client hosts)"})
        return 0
    cpu = [int(c) for c in args.cpu.split(",")] if args.cpu else None
    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"--max-seconds {args.max_seconds:g} reached")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(max(1, int(args.max_seconds)))
    handle = None
    sampler = None
    try:
        try:
            backend.check(req)
            handle = backend.start(req, cpu=cpu)
        except ServerSkipped as exc:
            _say({"format": SERVE_FORMAT, "event": "skipped", "reason": str(exc)})
            return 0
        except ServerFailed as exc:
            _say({"format": SERVE_FORMAT, "event": "failed", "reason": str(exc)})
            return 1
        if handle.pid is not None:
            sampler = TreeSampler(handle.pid)
            sampler.start()
        t = handle.target
        _say({"format": SERVE_FORMAT, "event": "ready", "host": name,
              "target": {"host": t.host, "port": t.port, "user": t.user, "password": t.password},
              "pid": handle.pid, "build_info": handle.build_info,
              "environment": snapshot({"backend": backend.name, "role": "server", "name": name})})
        for _ in range(1_000_000):  # one command a line; EOF ends; bounded in time by --max-seconds
            line = sys.stdin.readline()
            if not line:
                break
            cmd, _, arg = line.strip().partition(" ")
            if cmd == "fixture":
                fname = asyncio.run(_serve_fixture(t, int(arg)))
                _say({"event": "fixture", "name": fname})
            elif cmd == "checkpoint":
                snap = sampler.checkpoint(arg or "checkpoint") if sampler else None
                _say({"event": "checkpoint", "name": arg, "uss": snap.uss if snap else None,
                      "rss_minus_shared": snap.rss_minus_shared if snap else None})
            elif cmd == "cpu":
                u, s = sampler.cpu_times() if sampler else (None, None)
                _say({"event": "cpu", "user": u, "system": s})
            elif cmd == "alive":
                _say({"event": "alive", "alive": handle.alive()})
            elif cmd == "stop":
                break
            elif cmd:
                _say({"event": "error", "reason": f"unknown command {cmd!r}"})
        alive = handle.alive()
        if sampler is not None:
            sampler.stop()
        _say({"event": "stopped", "alive": alive,
              "peak_uss": sampler.peak_uss if sampler else None,
              "peak_rss_minus_shared": sampler.peak_rss_minus_shared if sampler else None,
              "timeline": [list(x) for x in sampler.timeline[-2000:]] if sampler else None})
        return 0
    except TimeoutError as exc:
        _say({"event": "failed", "reason": str(exc)})
        return 1
    finally:
        signal.alarm(0)
        if sampler is not None:
            try:
                sampler.stop()
            except Exception:  # noqa: BLE001 - cleanup
                pass
        if handle is not None:
            handle.stop()


# ----------------------------------------------------------------------------- control side


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


def split_clients(n: int, hosts: int) -> list[int]:
    """Split ``n`` clients over ``hosts`` hosts as evenly as possible, earlier hosts
    taking the remainder: ``split_clients(300, 2) == [150, 150]``,
    ``split_clients(5, 2) == [3, 2]``. Raises ValueError for ``hosts < 1``."""
    if hosts < 1:
        raise ValueError("need at least one client host")
    return [n // hosts + (1 if i < n % hosts else 0) for i in range(hosts)]


def host_params(workload: str, params: Any, share: int) -> Any:
    """The WorkloadParams one client host runs: ``params`` with ``clients = share``
    (its part of the N clients, or of the idle sessions of ``*_idle``)."""
    return params.model_copy(update={"clients": share})


def combine(results: list[tuple[str, PhaseResult]]) -> PhaseResult:
    """Combine per-host PhaseResults of one phase into one (module docstring: sums,
    merged latencies, concatenated per-client figures, union wall window or sum of
    single-stream throughputs). ``results`` is ``[(host name, result), ...]`` of one
    workload. Raises ValueError for an empty list or mixed workloads."""
    if not results:
        raise ValueError("combine: no results")
    wl = {r.workload for _, r in results}
    if len(wl) != 1:
        raise ValueError(f"combine: mixed workloads {sorted(wl)}")
    workload = wl.pop()
    errors: dict[str, int] = {}
    for _, r in results:
        for k, v in r.errors.items():
            errors[k] = errors.get(k, 0) + v
    total_bytes = sum(r.bytes for _, r in results)
    starts = [r.started_at for _, r in results if r.started_at is not None]
    ends = [r.ended_at for _, r in results if r.ended_at is not None]
    notes = [f"multi-host: load from {len(results)} client hosts: "
             + ", ".join(f"{h} ({r.ops} ops, {r.bytes} bytes)" for h, r in results)]
    if workload in SINGLE_STREAM:
        rate = sum(r.bytes / r.elapsed_s for _, r in results if r.elapsed_s > 0)
        elapsed = total_bytes / rate if rate > 0 else max(r.elapsed_s for _, r in results)
        notes.append("multi-host single-stream: throughput is the sum of the hosts' throughputs")
    elif starts and ends:
        elapsed = max(ends) - min(starts)
        notes.append("multi-host: elapsed from the earliest start to the latest end over all hosts")
    else:
        elapsed = max(r.elapsed_s for _, r in results)
    for h, r in results:
        notes += [f"{h}: {n}" for n in r.notes]
    return PhaseResult(
        workload=workload, elapsed_s=max(elapsed, 0.0), bytes=total_bytes, ops=sum(r.ops for _, r in results),
        latencies_ms=[x for _, r in results for x in r.latencies_ms], errors=errors,
        clients=[c for _, r in results for c in r.clients],
        client_cpu_user_s=sum(r.client_cpu_user_s for _, r in results),
        client_cpu_system_s=sum(r.client_cpu_system_s for _, r in results), notes=notes,
        started_at=min(starts) if starts else None, ended_at=max(ends) if ends else None)


def contribution_samples(docs: list[dict[str, Any]], results: list[tuple[str, PhaseResult]]) -> list:
    """One ``client_host`` sample per client host: value = that host's completed
    operations (count), ``raw`` = its own figures (bytes, ops, elapsed_s,
    throughput_mib_s, latency p50/p99 ms, errors, clients, client CPU s, started_at,
    ended_at, late_s: how late after the common start time it began)."""
    from runner.measure import latency_stats
    from runner.store.models import Sample

    out = []
    late = {d.get("name") or d.get("host"): d.get("late_s") for d in docs}
    for h, r in results:
        lat = latency_stats(r.latencies_ms)
        raw = {"host": h, "bytes": r.bytes, "ops": r.ops, "elapsed_s": r.elapsed_s,
               "throughput_mib_s": r.throughput_mib_s, "latency_p50_ms": lat.get("p50"),
               "latency_p99_ms": lat.get("p99"), "errors": r.errors, "clients": len(r.clients),
               "client_cpu_s": r.client_cpu_user_s + r.client_cpu_system_s,
               "started_at": r.started_at, "ended_at": r.ended_at, "late_s": late.get(h)}
        out.append(Sample(metric="client_host", stat=h[:20], value=float(r.ops), unit="count", raw=raw))
    return out


def run_loadgens(inv: Inventory, workload: str, target: dict[str, Any], params: Any, *, start_delay: float,
                 cpu: list[int] | None = None) -> tuple[list[dict[str, Any]], list[tuple[str, PhaseResult]]]:
    """Run ``xferlab loadgen`` on every client host over SSH with one common start time
    ``start_delay`` s ahead, the clients split by :func:`split_clients`. Returns
    ``(documents, [(host, PhaseResult), ...])`` for hosts that measured something.
    Raises MultiHostError when a host fails to report (the message has its stderr) or
    when no host measured anything."""
    from runner.loadgen_remote import result_from_json

    if workload in ("stor", "retr"):  # one stream per host; clients plays no part
        shares = [params.clients] * len(inv.clients)
    else:  # N-client workloads and the idle sessions of *_idle: split over the hosts
        shares = split_clients(params.clients, len(inv.clients))
    start_at = time.time() + start_delay
    procs = []
    for host, share in zip(inv.clients, shares):
        if share == 0:
            continue
        hp = host_params(workload, params, share)
        args = ["loadgen", "--host", target["host"], "--port", str(target["port"]), "--user", target["user"],
                "--password", target["password"], "--workload", workload,
                "--params", hp.model_dump_json(), "--start-at", f"{start_at:.6f}", "--name", host.name]
        if cpu:
            args += ["--cpu", ",".join(map(str, cpu))]
        procs.append((host, subprocess.Popen(host.argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                             stdin=subprocess.DEVNULL, text=True)))
    limit = start_delay + params.phase_timeout + 120.0
    deadline = time.monotonic() + limit
    docs, results, problems = [], [], []
    for host, p in procs:
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate(timeout=30)
            problems.append(f"{host.name}: xferlab loadgen did not finish within {limit:g} s")
            continue
        doc = None
        for line in reversed(out.strip().splitlines()):
            if line.startswith("{"):
                try:
                    doc = json.loads(line)
                except json.JSONDecodeError:
                    continue
                break
        if doc is None:
            problems.append(f"{host.name}: xferlab loadgen exited {p.returncode} without a result: "
                            f"{err.strip()[-1500:] or '(no stderr)'}")
            continue
        if "error" in doc:
            problems.append(f"{host.name}: {doc['error']}")
            continue
        docs.append(doc)
        results.append((host.name, result_from_json(doc["result"])))
    if not results:
        raise MultiHostError("no client host measured anything: " + "; ".join(problems))
    for prob in problems:  # hosts that measured nothing: recorded on the combined result
        log.warning("%s", prob)
    if problems:
        results[0][1].notes.append("client hosts without a result: " + "; ".join(problems))
        results[0][1].errors["host_failed"] = results[0][1].errors.get("host_failed", 0) + len(problems)
    return docs, results


_INVENTORIES: dict[tuple[str, float, str | None, tuple[str, ...] | None], Inventory] = {}


def inventory_for(spec: Any) -> Inventory:
    """The Inventory of ``spec.hosts`` (cached per file and modification time)."""
    h = spec.hosts
    if not h.inventory:
        raise MultiHostError("hosts.inventory is not set: give it in the spec or as xferlab run --inventory")
    p = Path(h.inventory)
    try:
        mtime = p.stat().st_mtime
    except OSError as exc:
        raise MultiHostError(f"inventory {p}: {exc.strerror}") from None
    key = (str(p.resolve()), mtime, h.server, tuple(h.clients) if h.clients else None)
    if key not in _INVENTORIES:
        _INVENTORIES[key] = load_inventory(p, server=h.server, clients=h.clients)
    return _INVENTORIES[key]


def _fixture_size(workload: str, params: Any) -> int | None:
    if workload in ("retr", "retr_idle"):
        return params.transfer_size
    if workload == "retr_concurrent":
        return params.file_size
    return None


def run_cell(cell: Any, spec: Any, *, reporter: Any = None) -> Any:
    """Run one cell across hosts (module docstring) and return a
    runner.execute.CellOutcome with the combined samples and the multi-host
    environment; never raises for server, SSH or load failures (they become a
    ``failed`` / ``skipped`` outcome naming the host and the cause)."""
    import traceback

    from runner.execute import CellOutcome, warmup_params
    from runner.load.workloads import WorkloadParams
    from runner.measure import headline, phase_samples
    from runner.spec import ServerSpec

    srv = ServerSpec.model_validate(cell.server_spec)
    params = WorkloadParams.model_validate(cell.params)
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
                                    cpu=spec.pinning.server, backend=spec.hosts.server_backend)
        ready = server.wait_ready()
        if ready.get("event") == "skipped":
            return CellOutcome("skipped", f"skipped: {ready.get('reason')}", summary=f"skipped: {ready.get('reason')}")
        if ready.get("event") != "ready":
            raise MultiHostError(f"{inv.server.name}: {ready.get('reason') or ready}")
        build = dict(ready.get("build_info") or {})
        target = ready["target"]
        size = _fixture_size(cell.workload, params)
        if size is not None:
            server.ask(f"fixture {size}")
        start_mem = server.ask("checkpoint start")
        if spec.warmup:
            wp = warmup_params(params)
            one = Inventory(inv.server, inv.clients[:1])
            run_loadgens(one, cell.workload, target, wp, start_delay=0.0, cpu=spec.pinning.client)
        cpu0 = server.ask("cpu")
        if reporter is not None:
            reporter.message(f"{cell.workload}: load from {', '.join(h.name for h in inv.clients)}")
        docs, results = run_loadgens(inv, cell.workload, target, params, start_delay=spec.hosts.start_delay,
                                     cpu=spec.pinning.client)
        cpu1 = server.ask("cpu")
        end_mem = server.ask("checkpoint end")
        alive = server.ask("alive").get("alive", True)
        stopped = server.stop()
        server = None
        result = combine(results)
        memory = {"uss": {}, "rss_minus_shared": {}}
        for name, snap in (("start", start_mem), ("end", end_mem)):
            for k in ("uss", "rss_minus_shared"):
                if snap.get(k) is not None:
                    memory[k][name] = snap[k]
        if stopped:
            memory["uss"]["peak"] = stopped.get("peak_uss")
            memory["rss_minus_shared"]["peak"] = stopped.get("peak_rss_minus_shared")
        server_cpu = None
        if cpu0.get("user") is not None and cpu1.get("user") is not None:
            server_cpu = (max(0.0, cpu1["user"] - cpu0["user"]), max(0.0, cpu1["system"] - cpu0["system"]))
        samples = phase_samples(result, memory=memory, server_cpu=server_cpu,
                                memory_timeline=(stopped or {}).get("timeline"))
        samples += contribution_samples(docs, results)
        env = dict(ready.get("environment") or {})
        env["backend"] = f"{env.get('backend', spec.hosts.server_backend)}+multihost"
        env["hosts"] = {"server": inv.server.name,
                        "clients": {d.get("host"): d.get("environment") for d in docs}}
        summary = headline(result) + f" [{len(results)} client hosts]"
        if result.error_count:
            kinds = ", ".join(f"{k}={v}" for k, v in sorted(result.errors.items()))
            reason = f"{result.error_count} failed operations ({kinds})"
            detail = "; ".join(n for n in result.notes if "first " in n or "phase timeout" in n
                               or "without a result" in n)
            if detail:
                reason += f": {detail}"
            if not alive:
                reason += f"; server on {inv.server.name} not running at the end of the cell"
            out = CellOutcome("failed", reason, result, samples, build, summary)
        else:
            out = CellOutcome("done", None, result, samples, build, summary)
        out.environment = env
        return out
    except MultiHostError as exc:
        return CellOutcome("failed", str(exc), summary=str(exc))
    except Exception as exc:  # a bug or an unexpected failure: record it, keep the campaign going
        log.debug("multi-host cell %s crashed", getattr(cell, "id", "?"), exc_info=True)
        tb = traceback.format_exc(limit=3)
        return CellOutcome("failed", f"{type(exc).__name__}: {exc}\n{tb}", summary=f"{type(exc).__name__}: {exc}")
    finally:
        if server is not None:
            server.stop()
