"""tpd, xferlab's C server, built from ``servers/tpd`` into the cache."""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from runner.backends.base import ServerSkipped
from runner.backends.local.recipes.base import (
    FTP_USER,
    Launch,
    Recipe,
    build_once,
    pasv_range,
    run_build,
    server_file,
    target_tls,
    tls_mode,
)
from runner.backends.local.recipes.http import http_options
from runner.backends.local.rundir import RunDir
from runner.backends.local.srcbuild import source_tpd
from runner.backends.local.venvs import cache_dir
from runner.backends.system import free_port
from runner.catalogue.servers import UPLOADS_DIR
from runner.load.target import Target
from runner.spec.request import ServerRequest


def tpd_source_hash(src: Path) -> str:
    """16 hex chars of sha256 over servers/tpd's sources (*.c, *.h, *.mk, *.in, Makefile):
    the build cache key."""
    h = hashlib.sha256()
    for f in sorted(src.rglob("*")):
        if f.is_file() and (f.suffix in {".c", ".h", ".mk", ".in"} or f.name in {"Makefile", "GNUmakefile"}):
            h.update(str(f.relative_to(src)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def tpd_tls_info(binary: Path) -> dict[str, Any]:
    """``tpd --tls-info``'s JSON line, e.g. ``{"tls": true, "openssl": "OpenSSL 3.0.x ...",
    "ktls_send": false, "ktls_reason": "..."}``.

    Raises:
        ServerSkipped: ``tpd built without TLS``: the option is unknown (exit status not 0),
            its output is not JSON, or ``tls`` is not true.
    """
    try:
        r = subprocess.run([str(binary), "--tls-info"], capture_output=True, text=True, timeout=10)
        info = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        raise ServerSkipped(f"tpd built without TLS (tpd --tls-info: {e})") from None
    if not isinstance(info, dict) or info.get("tls") is not True:
        why = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[0][:200]
        raise ServerSkipped(f"tpd built without TLS (tpd --tls-info: {why})")
    return info


class TpdRecipe(Recipe):
    """xferlab's C server, built with ``make -C servers/tpd OUT=<cache>/tpd/<srchash>``
    (rebuilt when the sources' hash changes). Serves FTP and HTTP (Target.http_port).
    Variant keys: ``use_sendfile`` (default True), ``pasv_ports`` (default a 2000-port
    window derived from the FTP port), ``idle_timeout`` (s, default 300), ``max_body``
    (HTTP uploads, ``--max-body``; default 1 GiB, as every HTTP server), ``tls`` (``--tls-cert``/``--tls-key``;
    implicit: an ``--ftps-listen`` listener, which the target then is; skipped with "tpd
    built without TLS" when ``tpd --tls-info`` fails). Creates ``<home>/uploads``."""

    name = "tpd"

    @property
    def src(self) -> Path:
        """The source tree, ``servers/tpd``."""
        return server_file("tpd")

    def quick_check(self) -> str | None:
        if not (self.src / "Makefile").is_file():
            return f"tpd: {self.src / 'Makefile'} not found (the C server is not in this checkout yet)"
        if not shutil.which("make") or not (shutil.which("cc") or shutil.which("gcc")):
            return "tpd: make/cc not found; apt-get install build-essential"
        return None

    def out_dir(self) -> Path:
        """Where this source tree's build goes: ``<cache>/tpd/<source hash>``."""
        return cache_dir() / "tpd" / tpd_source_hash(self.src)

    def prepare(self, req: ServerRequest) -> None:
        binary, _src = self.build_for(req)
        if tls_mode(req) is not None:
            tpd_tls_info(binary)

    def build_for(self, req: ServerRequest) -> tuple[Path, dict[str, Any]]:
        """The binary ``req`` runs and its build_info entries (version, obtained, source):
        ``servers/tpd`` of this checkout (:meth:`build`), or ``req.source`` at ``req.ref``
        (runner.backends.local.srcbuild.source_tpd; version ``git-<commit[:12]>``). Raises
        ServerFailed when a build fails or a source does not resolve."""
        if req.source is None:
            return self.build(), {"version": f"src-{self.out_dir().name}", "obtained": f"built from {self.src}"}
        binary, src = source_tpd(req, self.backend.progress)
        return binary, {"version": f"git-{src.short}", "obtained": f"built from {src.location} at {src.commit}",
                        "source": src.info()}

    def build(self) -> Path:
        """The tpd binary, built once per source hash (file lock against parallel
        builds). Raises ServerFailed with the build log tail on failure or timeout (600 s)."""
        out = self.out_dir()
        binary = out / "tpd"

        def build() -> None:
            self.backend.progress(f"building tpd into {out}")
            run_build("tpd: build", ["make", "-C", str(self.src), f"OUT={out}"], 600,
                      done=lambda rc: rc == 0 and binary.is_file(), failed=f"make -C {self.src} OUT={out}, ")
            (out / ".built").write_text(str(time.time()))

        build_once(out, lambda: binary.is_file() and (out / ".built").exists(), 600, build)
        return binary

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        binary, build_entries = self.build_for(req)
        http_port = free_port(self.host)
        password = secrets.token_hex(8)
        users = run.path / "users"
        users.write_text(f"{FTP_USER}:{{plain}}{password}:{run.home}:rw\n")
        os.chmod(users, 0o600)
        pr = pasv_range(req.variant)
        if pr is None:  # a window away from the kernel's ephemeral range (32768-60999)
            lo = 10000 + (port * 7919) % 20 * 1000
            pr = (lo, lo + 1999)
        idle = int(req.variant.get("idle_timeout", 300))
        opts = ["--pasv-ports", f"{pr[0]}-{pr[1]}", "--max-conns", str(req.max_clients),
                "--idle-timeout", str(idle), "--log-level", "warn"]
        if not req.variant.get("use_sendfile", True):
            opts.append("--no-sendfile")
        opts += ["--max-body", str(http_options(req)[0])]  # the variant's, default 1 GiB
        (run.home / UPLOADS_DIR).mkdir(exist_ok=True)  # the HTTP upload folder (runner.catalogue.servers)
        host = self.host
        argv = [str(binary), "--ftp-listen", f"{host}:{port}", "--http-listen", f"{host}:{http_port}",
                "--users", str(users), *opts]
        mode = tls_mode(req)
        tls_info: dict[str, Any] = {}
        ftp_port = port
        if mode is not None:
            tls_info = {"tls_info": tpd_tls_info(binary)}
            argv += ["--tls-cert", str(req.tls.cert), "--tls-key", str(req.tls.key)]
            opts.append("--tls-cert/--tls-key")
            if mode == "implicit":  # the target is the implicit listener; the plain one stays
                ftp_port = free_port(host)
                argv += ["--ftps-listen", f"{host}:{ftp_port}"]
                opts.append("--ftps-listen")
            elif mode == "https":  # the target's HTTP port is the HTTPS listener; the plain one stays
                http_port = free_port(host)
                argv += ["--https-listen", f"{host}:{http_port}"]
                opts.append("--https-listen")
        binary_src = self.out_dir().name if req.source is None else build_entries["version"]
        norm = json.dumps({"options": [o for o in opts if not o[0].isdigit()] + [
            f"pasv_width={pr[1] - pr[0] + 1}"], "binary_src": binary_src}, sort_keys=True)
        return Launch(argv, Target(host, ftp_port, FTP_USER, password, run.home, http_port=http_port,
                                   tls=target_tls(req)), norm,
                      {**build_entries, "binary": str(binary), "interpreter": None, **tls_info})
