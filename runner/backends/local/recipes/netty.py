"""Netty (Debian's ``libnetty-java``, 4.1) running ``servers/netty/NettyServer.java``,
compiled with the installed JDK (``openjdk-17-jdk-headless``) into the cache."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from runner.backends.local.recipes.base import (
    Launch,
    Recipe,
    ServerFailed,
    build_once,
    command_output,
    run_build,
    server_file,
    source_hash,
    tls_mode,
)
from runner.backends.local.recipes.http import http_options, http_target
from runner.backends.local.rundir import RunDir
from runner.backends.local.srcbuild import resolved_tree
from runner.backends.local.venvs import cache_dir
from runner.backends.source import resolve
from runner.spec.request import ServerRequest

#: Debian's jars the server needs (``libnetty-java``; jctools: its dependency, used by netty-common).
NETTY_JARS = ("netty-buffer", "netty-codec", "netty-codec-http", "netty-common", "netty-handler",
              "netty-transport", "netty-resolver", "jctools-core")
JAVA_DIR = Path("/usr/share/java")


def netty_classpath() -> list[Path]:
    """The jars of :data:`NETTY_JARS` under /usr/share/java (missing ones left out)."""
    return [p for p in (JAVA_DIR / f"{j}.jar" for j in NETTY_JARS) if p.is_file()]


class NettyRecipe(Recipe):
    """Netty 4.1 (NIO transport): ``servers/netty/NettyServer.java`` compiled once per
    source hash into ``<cache>/netty/<hash>``, run with the installed ``java``. Variant
    keys: ``workers`` (event-loop threads, default 1), ``keepalive``, ``max_body``,
    ``storage``, ``tls: https`` (``--tls-cert``/``--tls-key``: an SslHandler, the JDK's
    TLS 1.2/1.3; downloads as ChunkedFile instead of sendfile)."""

    name = "netty"

    def quick_check(self) -> str | None:
        missing = [j for j in NETTY_JARS if not (JAVA_DIR / f"{j}.jar").is_file()]
        if not shutil.which("javac") or not shutil.which("java") or missing:
            what = f"jars {', '.join(missing)} missing from {JAVA_DIR}" if missing else "no javac/java"
            return f"netty: {what}; apt-get install openjdk-17-jdk-headless libnetty-java"
        return None

    def prepare(self, req: ServerRequest) -> None:
        self.build(req)

    def build(self, req: ServerRequest | None = None) -> Path:
        """The folder of compiled classes, built once per source hash (file lock), or for
        ``req`` built from source the tree's ``servers/netty`` into ``<build_root>/netty``
        (runner.backends.local.srcbuild). Raises ServerFailed with javac's output tail on
        failure or timeout (300 s), or when a source does not resolve."""
        src = server_file("netty")
        out = cache_dir() / "netty" / source_hash(src, frozenset({".java"}))
        if req is not None and req.source is not None:
            resolved, tree = resolved_tree(req)
            src, out = tree / "servers" / "netty", resolved.build_root / "netty"
            if not (src / "NettyServer.java").is_file():
                raise ServerFailed(f"netty at {resolved.short}: {req.source} has no servers/netty/NettyServer.java")

        def build() -> None:
            self.backend.progress(f"compiling netty server into {out}")
            cp = ":".join(str(p) for p in netty_classpath())
            run_build("netty: javac", ["javac", "-d", str(out), "-cp", cp, str(src / "NettyServer.java")], 300)

        build_once(out, (out / "NettyServer.class").is_file, 300, build)
        return out

    def launch(self, req: ServerRequest, run: RunDir, port: int) -> Launch:
        classes = self.build(req)
        max_body, workers, keepalive = http_options(req)
        opts = ["--workers", str(workers), "--max-body", str(max_body), "--keepalive", "1" if keepalive else "0",
                "--backlog", "4096"]
        java = shutil.which("java") or "java"
        cp = ":".join([str(classes), *(str(p) for p in netty_classpath())])
        argv = [java, "-cp", cp, "NettyServer", "--host", self.host, "--port", str(port), "--home", str(run.home),
                *opts]
        if tls_mode(req) == "https":
            argv += ["--tls-cert", str(req.tls.cert), "--tls-key", str(req.tls.key)]
        # the Debian package's version, e.g. 1:4.1.48-7+deb12u2
        version = command_output(["dpkg-query", "-W", "-f", "${Version}", "libnetty-java"])
        cfg = json.dumps({"options": opts, "classes": classes.name, "https": tls_mode(req) == "https"},
                         sort_keys=True)
        info: dict[str, Any] = {"version": version, "binary": str(server_file("netty", "NettyServer.java")),
                "interpreter": java, "obtained": "system (libnetty-java)"}
        if req.source is not None:  # one build row per commit: the commit in the version
            resolved = resolve(req.source, req.ref)
            info.update({"version": f"{version}+git-{resolved.short}", "source": resolved.info(),
                         "binary": str(classes), "obtained": f"NettyServer.java of {req.source} at {resolved.commit}"
                         " with system libnetty-java"})
        return Launch(argv, http_target(self.host, run, port, req), cfg, info, ready_timeout=40.0)
