"""HTTP-only servers under test: Go net/http (built from ``servers/go-http``),
nginx (Debian's, DAV PUT) and Node.js ``http`` (Debian's ``nodejs``). Each serves its run
home (``GET``) and stores uploads in ``<home>/uploads`` (``PUT /uploads/<name>``, and
``POST /uploads/`` except nginx): runner.catalogue.servers has the interface."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from runner.backends.base import ServerFailed, ServerSkipped
from runner.backends.local.recipes.base import (
    FTP_USER,
    Launch,
    Recipe,
    build_once,
    command_output,
    render,
    run_build,
    server_file,
    source_hash,
    target_tls,
    tls_mode,
)
from runner.backends.local.rundir import RunDir
from runner.backends.local.srcbuild import resolved_tree
from runner.backends.local.venvs import cache_dir
from runner.backends.source import resolve
from runner.backends.system import nofile_target
from runner.catalogue import variants
from runner.catalogue.servers import DEFAULT_MAX_BODY, UPLOADS_DIR
from runner.load.target import Target
from runner.spec.request import ServerRequest


def http_options(req: ServerRequest) -> tuple[int, int, bool]:
    """The variant's HTTP keys as (max body in bytes, workers, keep-alive): defaults
    1 GiB, 1, True. Raises ServerSkipped naming a bad ``max_body``."""
    var = req.variant
    try:
        max_body = variants.parse_size(var.get("max_body", DEFAULT_MAX_BODY))
    except ValueError as e:
        raise ServerSkipped(f"{req.label}: invalid max_body: {e}") from None
    return max_body, int(var.get("workers", 1)), bool(var.get("keepalive", True))


def http_target(host: str, run: RunDir, port: int, req: ServerRequest | None = None) -> Target:
    """The Target of an HTTP-only server on ``port``: FTP port 0, no password, ``root``
    the run home (whose ``uploads`` folder this creates); with ``req`` of variant
    ``tls: https``, the target speaks HTTPS (``Target.tls``)."""
    (run.home / UPLOADS_DIR).mkdir(exist_ok=True)
    return Target(host, 0, FTP_USER, "", run.home, http_port=port, tls=target_tls(req) if req is not None else None)


class GoHttpRecipe(Recipe):
    """Go ``net/http`` (``servers/go-http``, standard library only), built with Debian's
    ``golang-go`` into ``<cache>/go-http/<source hash>`` (static, ``CGO_ENABLED=0``).
    Variant keys: ``workers`` (GOMAXPROCS; default: every CPU it may run on),
    ``keepalive``, ``max_body``, ``storage``, ``tls: https`` (``-tls-cert``/``-tls-key``:
    crypto/tls, HTTP/1.1 only)."""

    name = "go-http"

    @property
    def src(self) -> Path:
        """The source folder, ``servers/go-http``."""
        return server_file("go-http")

    def go(self) -> str | None:
        """The ``go`` command (PATH, then Debian's /usr/lib/go/bin/go), None when absent."""
        return shutil.which("go") or next((p for p in ("/usr/lib/go/bin/go",) if os.access(p, os.X_OK)), None)

    def quick_check(self) -> str | None:
        if not (self.src / "main.go").is_file():
            return f"go-http: {self.src / 'main.go'} not found"
        if self.go() is None:
            return "go-http: the Go toolchain (go) is not installed; apt-get install golang-go"
        return None

    def prepare(self, req: ServerRequest) -> None:
        self.build(req)

    def build(self, req: ServerRequest | None = None) -> Path:
        """The binary, built once per source hash (file lock against parallel builds; Go's
        build cache in ``<cache>/go-build``), or for ``req`` built from source the tree's
        ``servers/go-http`` into ``<build_root>/go-http`` (runner.backends.local.srcbuild).
        Raises ServerFailed with the compiler's output tail on failure or timeout (600 s),
        or when a source does not resolve."""
        src_dir, out = self.src, cache_dir() / "go-http" / source_hash(self.src, frozenset({".go", ".mod"}))
        if req is not None and req.source is not None:
            resolved, tree = resolved_tree(req)
            src_dir, out = tree / "servers" / "go-http", resolved.build_root / "go-http"
            if not (src_dir / "main.go").is_file():
                raise ServerFailed(f"go-http at {resolved.short}: {req.source} has no servers/go-http/main.go")
        binary = out / "go-http"

        def build() -> None:
            go = self.go()
            if go is None:
                raise ServerSkipped(self.quick_check() or "go-http: no Go toolchain")
            self.backend.progress(f"building go-http from {src_dir} into {out}")
            env = {**os.environ, "CGO_ENABLED": "0", "GOCACHE": str(cache_dir() / "go-build"),
                   "GOFLAGS": "-buildvcs=false", "GOPATH": str(cache_dir() / "gopath"), "GOTOOLCHAIN": "local"}
            run_build("go-http: go build", [go, "build", "-trimpath", "-o", str(out / "go-http.tmp"), "."], 600,
                      cwd=src_dir, env=env)
            os.replace(out / "go-http.tmp", binary)

        build_once(out, binary.is_file, 600, build)
        return binary

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        binary = self.build(req)
        max_body, _workers, keepalive = http_options(req)
        opts = ["-max-body", str(max_body), f"-keepalive={'true' if keepalive else 'false'}"]
        env = {"GOMAXPROCS": str(req.variant["workers"])} if "workers" in req.variant else {}
        argv = [str(binary), "-listen", f"{self.host}:{port}", "-home", str(run.home), *opts]
        if tls_mode(req) == "https":  # crypto/tls on the one listener, the campaign's certificate
            argv += ["-tls-cert", str(req.tls.cert), "-tls-key", str(req.tls.key)]
        version = command_output([str(binary), "-version"])
        cfg = json.dumps({"options": opts, "env": env, "binary_src": binary.parent.name,
                          "https": tls_mode(req) == "https"}, sort_keys=True)
        info: dict[str, Any] = {"version": f"go{version}-src-{binary.parent.name}", "binary": str(binary),
                                "interpreter": None, "obtained": f"built from {self.src} with {self.go()}"}
        if req.source is not None:  # one build row per commit: the commit in the version
            resolved = resolve(req.source, req.ref)
            info.update({"version": f"go{version}-git-{resolved.short}", "source": resolved.info(),
                         "obtained": f"built from {req.source} at {resolved.commit} with {self.go()}"})
        return Launch(argv, http_target(self.host, run, port, req), cfg, info, env=env)


def nginx_version(binary: str) -> str:
    """``nginx -v`` as ``"1.22.1"``; ``""`` when it cannot be run."""
    try:
        r = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (r.stderr or r.stdout).strip().rpartition("/")[2]


class NginxRecipe(Recipe):
    """Debian's nginx (``/usr/sbin/nginx``): static GET, ``PUT /uploads/<name>`` through
    its DAV module (no POST: ``upload_note`` of its runner.catalogue.servers.ServerInfo), config from
    ``servers/nginx/nginx.conf.tmpl``. Variant keys: ``workers`` (worker_processes,
    default 1), ``keepalive``, ``max_body`` (client_max_body_size), ``use_sendfile``,
    ``storage``."""

    name = "nginx"
    binary = "/usr/sbin/nginx"

    def quick_check(self) -> str | None:
        if not os.access(self.binary, os.X_OK):
            return f"nginx: {self.binary} not found; apt-get install nginx"
        return None

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        max_body, workers, keepalive = http_options(req)
        body_temp = run.path / "body_temp"  # beside the home: same filesystem, DAV renames from it
        body_temp.mkdir(exist_ok=True)
        values: dict[str, Any] = {
            "workers": workers, "nofile": nofile_target(), "run": run.path,
            "user_line": "user root;" if os.geteuid() == 0 else "", "connections": req.max_clients + 1024,
            "sendfile": "on" if req.variant.get("use_sendfile", True) else "off",
            "keepalive_timeout": "300s" if keepalive else "0", "max_body": max_body, "body_temp": body_temp,
            "listen": f"{self.host}:{port}", "home": run.home, "ssl_listen": "", "ssl_lines": ""}
        if tls_mode(req) == "https":  # the campaign's certificate; TLS 1.2/1.3, nginx's default ciphers
            values.update({"ssl_listen": " ssl", "ssl_lines": f"        ssl_certificate {req.tls.cert};\n"
                           f"        ssl_certificate_key {req.tls.key};\n        ssl_protocols TLSv1.2 TLSv1.3;\n"})
        text = render(server_file("nginx", "nginx.conf.tmpl"), values)
        conf = run.path / "nginx.conf"
        conf.write_text(text)
        norm = text.replace(str(run.path), "RUN").replace(f":{port} ", ":PORT ")
        if req.tls is not None:
            norm = norm.replace(str(req.tls.cert.parent), "CERTS")
        argv = [self.binary, "-e", "stderr", "-p", str(run.path), "-c", str(conf)]
        return Launch(argv, http_target(self.host, run, port, req), norm,
                      {"version": nginx_version(self.binary), "binary": self.binary, "interpreter": None,
                       "obtained": "system"})


class NodeHttpRecipe(Recipe):
    """Node.js ``http`` (``servers/node-http/server.js``, core modules only) on the
    installed ``node``. Variant keys: ``workers`` (N > 1: the ``cluster`` module's
    primary hands connections to N workers round-robin, as seed 002's 4 instances),
    ``keepalive``, ``max_body``, ``storage``, ``tls: https`` (``--tls-cert``/``--tls-key``:
    Node's ``https`` module, TLS 1.2/1.3, in every worker)."""

    name = "node-http"

    def node(self) -> str | None:
        """The ``node`` command (``node`` or Debian's ``nodejs``), None when absent."""
        return shutil.which("node") or shutil.which("nodejs")

    def quick_check(self) -> str | None:
        if self.node() is None:
            return "node-http: Node.js (node) is not installed; apt-get install nodejs"
        if not server_file("node-http", "server.js").is_file():
            return f"node-http: {server_file('node-http', 'server.js')} not found"
        return None

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        node = self.node()
        if node is None:
            raise ServerSkipped(self.quick_check() or "node-http: no node")
        script = server_file("node-http", "server.js")
        max_body, workers, keepalive = http_options(req)
        opts = ["--workers", str(workers), "--max-body", str(max_body), "--keepalive", "1" if keepalive else "0",
                "--backlog", "4096"]
        argv = [node, *(["--perf-basic-prof"] if req.perf_map else []), str(script), "--host", self.host,
                "--port", str(port), "--home", str(run.home), *opts]
        if tls_mode(req) == "https":  # the https module (each cluster worker does its own TLS)
            argv += ["--tls-cert", str(req.tls.cert), "--tls-key", str(req.tls.key)]
        version = command_output([node, "--version"]).lstrip("v")
        cfg = json.dumps({"options": opts, "script_sha256": hashlib.sha256(script.read_bytes()).hexdigest(),
                          "https": tls_mode(req) == "https"}, sort_keys=True)
        return Launch(argv, http_target(self.host, run, port, req), cfg,
                      {"version": version, "binary": str(script), "interpreter": node, "obtained": "system"})
