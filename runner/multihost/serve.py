"""The server-host side of a multi-host cell: ``xferlab serve`` (:func:`serve_main`).

It starts one server bound to the host's address, samples its process tree there and
answers one-line commands of the control side (runner.cell.remote.RemoteServer)
with one JSON line each.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runner.backends.base import Backend

SERVE_FORMAT = "xferlab-serve/1"


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of ``xferlab serve`` (used by runner/cli.py)."""
    p.add_argument("--server", required=True, help="server spec as JSON (runner.spec.model.ServerSpec)")
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
      "alive"}``; ``profile JSON`` (a runner.spec.profile.ProfileSpec) -> ``{"event":
      "profile", "started"}``, the server's profilers started on this host
      (runner.backends.profiling.start_profile, over its cgroup); ``profile-stop`` ->
      ``{"event": "profile", "profile"}`` (runner.metrics.profile_data.profile_to_dict,
      or None); ``stop`` or EOF -> ``{"event": "stopped", "peak_uss",
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
    from runner.backends.profiling import start_profile, stop_profile
    from runner.load.ftp.fixtures import place_server_file
    from runner.metrics.environment import snapshot
    from runner.metrics.profile_data import profile_to_dict
    from runner.metrics.sampler import TreeSampler
    from runner.spec.model import ServerSpec
    from runner.spec.profile import ProfileSpec

    name = args.name or socket.gethostname()
    try:
        srv = ServerSpec.model_validate(json.loads(args.server))
    except ValueError as exc:
        _say({"format": SERVE_FORMAT, "event": "failed", "reason": f"--server: {exc}"})
        return 2
    if args.backend == "docker":
        from runner.backends.docker import DockerBackend

        try:
            backend: Backend = DockerBackend(network="host", bind=args.bind)
        except RuntimeError as exc:
            _say({"format": SERVE_FORMAT, "event": "skipped", "reason": str(exc)})
            return 0
    else:
        backend = local.LocalBackend(host=args.bind)
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
    profiler = None
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
                fname = asyncio.run(place_server_file(t, int(arg)))
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
            elif cmd == "profile":
                try:
                    want = ProfileSpec.model_validate_json(arg)
                except ValueError as exc:
                    _say({"event": "error", "reason": f"profile: {exc}"})
                    continue
                if profiler is not None:
                    profiler.close()
                profiler = start_profile(want, srv.name, handle, handle.cgroup_cpu())
                _say({"event": "profile", "started": profiler is not None})
            elif cmd == "profile-stop":
                got = stop_profile(profiler)
                profiler = None
                _say({"event": "profile", "profile": profile_to_dict(got) if got is not None else None})
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
        if profiler is not None:
            profiler.close()
        if sampler is not None:
            try:
                sampler.stop()
            except Exception:  # noqa: BLE001 - cleanup
                pass
        if handle is not None:
            handle.stop()

