#!/usr/bin/env python3
"""Compare the HTTP load drivers (xferlab-http, wrk, h2load) against one HTTP server
on loopback: requests/s, client CPU (user + system s, and CPU s per 1000 successful
requests) and peak memory of each driver, and the ratio of xferlab-http's requests/s
to wrk's (the compiled drivers exist so that the client is never what is
measured; if ours is slower, by how much).

The server (``--server``) is Debian's nginx (one worker, PUT through its DAV module;
the default: a fast, well-known reference), tpd's HTTP listener (servers/tpd, built
with ``make`` when missing) or go-http (servers/go-http, Go's net/http, built with
``go build`` into the run's folder), its home on tmpfs (/dev/shm) unless ``--home`` says
otherwise, pinned to CPU 0; the drivers
run pinned to CPU 1 (on a machine with two CPUs). Workloads: ``upload`` (http_upload,
``PUT /uploads/<unique name>``, ``--body`` bytes) and ``download`` (http_download of a
``--file-size`` fixture). Uploads are PUTs; h2load can only POST, so its upload row
is listed as skipped with that reason. xferlab-http runs in a child process (this script
with ``--role``) so its peak RSS is its own (VmHWM, as for wrk and h2load:
runner.load.tools.child); its CPU is the phase's ``os.times()`` delta, wrk's and h2load's
their wait4 rusage. Usage:

    .venv/bin/python benchmarks/http_drivers.py [--clients 500] [--duration 5]
        [--workloads upload,download] [--drivers xferlab-http,wrk,h2load] [--body 8192]
        [--file-size 8192] [--server nginx|tpd|go-http] [--rounds 3] [--home DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TPD = REPO / "servers" / "tpd" / "build" / "tpd"
WORKLOADS = {"upload": "http_upload", "download": "http_download"}


def _pin(cpu: int) -> None:
    if (os.cpu_count() or 1) > cpu:
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:
            pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _params(args: argparse.Namespace, workload: str):
    from runner.catalogue.workloads import WorkloadParams

    return WorkloadParams(clients=args.clients, duration=args.duration, body_size=args.body,
                          file_size=args.file_size, method="put")


def _target(port: int, home: Path):
    from runner.load.target import Target

    return Target(host="127.0.0.1", port=1, user="-", password="-", root=home, http_port=port)


NGINX_CONF = """{user}worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log error;
daemon off;
events {{ worker_connections 16384; }}
http {{
  access_log off;
  sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_requests 100000000; keepalive_timeout 300s;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/body; fastcgi_temp_path {tmp}/body;
  uwsgi_temp_path {tmp}/body; scgi_temp_path {tmp}/body;
  server {{
    listen 127.0.0.1:{port} backlog=4096;
    root {home};
    location /uploads/ {{ dav_methods PUT; client_max_body_size 1g; }}
  }}
}}
"""


def start_server(kind: str, tmp: Path, home: Path, port: int) -> subprocess.Popen:
    """Start ``tpd`` (built with make when missing), ``go-http`` (built with ``go build``)
    or ``nginx`` (Debian's, one worker, PUT through its DAV module) on ``127.0.0.1:port``
    serving ``home``, pinned to CPU 0. Raises CalledProcessError when a build fails."""
    if kind == "go-http":
        src = REPO / "servers" / "go-http"
        env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false", "GOTOOLCHAIN": "local",
               "GOCACHE": str(tmp / "go-build"), "GOPATH": str(tmp / "gopath")}
        subprocess.run(["go", "build", "-trimpath", "-o", str(tmp / "go-http"), "."], cwd=src, env=env, check=True)
        argv = [str(tmp / "go-http"), "--listen", f"127.0.0.1:{port}", "--home", str(home)]
    elif kind == "nginx":
        exe = shutil.which("nginx") or "/usr/sbin/nginx"
        (tmp / "body").mkdir()
        conf = tmp / "nginx.conf"
        conf.write_text(NGINX_CONF.format(user="user root root;\n" if os.geteuid() == 0 else "", tmp=tmp,
                                          home=home, port=port))
        argv = [exe, "-e", str(tmp / "error.log"), "-c", str(conf), "-p", str(tmp)]
    else:
        if not TPD.exists():
            subprocess.run(["make", "-C", str(TPD.parents[1])], check=True, stdout=subprocess.DEVNULL)
        (tmp / "users").write_text(f"bench:{{plain}}x:{home}:rw\n")
        argv = [str(TPD), "--ftp-listen", f"127.0.0.1:{_free_port()}", "--http-listen", f"127.0.0.1:{port}",
                "--users", str(tmp / "users"), "--log-level", "error"]
    return subprocess.Popen(argv, preexec_fn=lambda: _pin(0))


def role(args: argparse.Namespace) -> None:
    """Child: run xferlab-http once and print its PhaseResult figures as one JSON line."""
    from runner.load.registry import get_driver

    _pin(1)
    r = get_driver("xferlab-http").run(args.workload, _target(args.port, Path(args.home)),
                                       _params(args, args.workload))
    print(json.dumps({"successful": r.successful, "requests": r.requests, "network_failed": r.network_failed,
                      "non_2xx": sum(r.non_2xx.values()), "elapsed_s": r.elapsed_s,
                      "cpu_s": r.client_cpu_user_s + r.client_cpu_system_s}))


def run_xferlab(args: argparse.Namespace, workload: str, port: int, home: Path) -> dict:
    """xferlab-http in a child process (:func:`role`); its peak RSS as wrk's and h2load's
    (runner.load.tools.child.run_child: the program's own VmHWM)."""
    argv = [sys.executable, __file__, "--role", "--workload", workload, "--port", str(port), "--home", str(home),
            "--clients", str(args.clients), "--duration", str(args.duration), "--body", str(args.body),
            "--file-size", str(args.file_size)]
    from runner.load.tools.child import run_child

    run = run_child(argv, netns=None, timeout_s=args.duration + 120)
    if run.returncode != 0:
        raise RuntimeError(f"xferlab-http role failed (exit {run.returncode}): {run.stderr[-2000:]}")
    d = json.loads(run.stdout.strip().splitlines()[-1])
    d["max_rss"] = run.max_rss
    return d


def run_tool(name: str, args: argparse.Namespace, workload: str, port: int, home: Path) -> dict:
    """wrk or h2load through its driver (CPU and max RSS from the driver's wait4)."""
    from runner.load.registry import get_driver

    r = get_driver(name).run(workload, _target(port, home), _params(args, workload))
    return {"successful": r.successful, "requests": r.requests, "network_failed": r.network_failed,
            "non_2xx": sum(r.non_2xx.values()), "elapsed_s": r.elapsed_s,
            "cpu_s": r.client_cpu_user_s + r.client_cpu_system_s, "max_rss": r.driver_max_rss}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=500)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--workloads", default="upload,download")
    ap.add_argument("--drivers", default="xferlab-http,wrk,h2load")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each driver, interleaved (median printed)")
    ap.add_argument("--body", type=int, default=8192, help="upload body bytes (seed 002: about 8 KiB)")
    ap.add_argument("--file-size", type=int, default=8192, help="download fixture bytes")
    ap.add_argument("--server", choices=("nginx", "tpd", "go-http"), default="nginx",
                    help="server under load: Debian's nginx (default), tpd's HTTP listener or go-http")
    ap.add_argument("--home", default=None, help="server home (default: a folder on /dev/shm, else /tmp)")
    ap.add_argument("--role", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workload", default="http_upload", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role:
        role(args)
        return 0
    from runner.load.ftp.phase import raise_nofile_limit

    raise_nofile_limit()
    base = Path(args.home) if args.home else Path("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
    tmp = Path(tempfile.mkdtemp(prefix="xferlab-http-bench-", dir=base))
    home = tmp / "home"
    (home / "uploads").mkdir(parents=True)
    port = _free_port()
    srv = start_server(args.server, tmp, home, port)
    runs: dict[tuple[str, str], list[dict]] = {}
    skipped: dict[tuple[str, str], str] = {}
    try:
        for _ in range(100):  # wait for the listener, 10 s at most
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        _pin(1)
        drivers = args.drivers.split(",")
        for rnd in range(args.rounds):  # drivers interleaved, order alternating per round
            for wl in args.workloads.split(","):
                workload = WORKLOADS[wl]
                for drv in drivers if rnd % 2 == 0 else drivers[::-1]:
                    if drv == "h2load" and workload == "http_upload":
                        skipped[(wl, drv)] = "h2load only POSTs; the uploads here are PUTs"
                        continue
                    if drv != "xferlab-http" and shutil.which(drv) is None:
                        skipped[(wl, drv)] = f"{drv} not installed"
                        continue
                    shutil.rmtree(home / "uploads")
                    (home / "uploads").mkdir()
                    d = run_xferlab(args, workload, port, home) if drv == "xferlab-http" else \
                        run_tool(drv, args, workload, port, home)
                    d["rps"] = d["successful"] / d["elapsed_s"] if d["elapsed_s"] > 0 else 0.0
                    runs.setdefault((wl, drv), []).append(d)
                    time.sleep(1)  # let the server's TIME_WAIT and backlog settle between drivers
    finally:
        srv.terminate()
        srv.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.server} HTTP on loopback, {args.clients} clients, {args.duration:g} s x {args.rounds} rounds, "
          f"body {args.body} B, file {args.file_size} B, CPUs: server 0, driver 1; medians (req/s range)")
    print(f"{'workload':9} {'driver':13} {'req/s':>9} {'(min-max)':>15} {'netfail':>7} {'non2xx':>6} {'cpu s':>6} "
          f"{'cpu s/1k req':>12} {'max RSS MiB':>11}")
    rate: dict[tuple[str, str], float] = {}
    for wl in args.workloads.split(","):
        for drv in drivers:
            if (wl, drv) in skipped:
                print(f"{wl:9} {drv:13} {'-':>9}  ({skipped[(wl, drv)]})")
                continue
            ds = runs[(wl, drv)]
            rps = statistics.median(d["rps"] for d in ds)
            rate[(wl, drv)] = rps
            cpu = statistics.median(d["cpu_s"] for d in ds)
            per_k = statistics.median(d["cpu_s"] / d["successful"] * 1000 if d["successful"] else float("nan")
                                      for d in ds)
            span = f"({min(d['rps'] for d in ds):,.0f}-{max(d['rps'] for d in ds):,.0f})"
            print(f"{wl:9} {drv:13} {rps:9,.0f} {span:>15} {sum(d['network_failed'] for d in ds):7d} "
                  f"{sum(d['non_2xx'] for d in ds):6d} {cpu:6.2f} {per_k:12.3f} "
                  f"{max(d['max_rss'] for d in ds) / (1 << 20):11.1f}")
    for wl in args.workloads.split(","):
        if rate.get((wl, "wrk")) and (wl, "xferlab-http") in rate:
            print(f"{wl}: xferlab-http / wrk req/s = {rate[(wl, 'xferlab-http')] / rate[(wl, 'wrk')]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
