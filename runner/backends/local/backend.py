"""The local backend: runs each server as a child process on this machine."""
from __future__ import annotations

import shutil
from collections.abc import Callable

from .. import variants
from ..base import ServerFailed, ServerRequest, ServerSkipped
from ..catalogue import tls_skip_reason
from ..external import ExternalHandle, check_external, start_external
from ..system import free_port
from .process import LocalServerHandle, spawn
from .recipes import RECIPES, Recipe
from .rundir import RunDir

Progress = Callable[[str], None]

#: Server names this backend knows (``external`` needs ServerRequest.external).
KNOWN_SERVERS = ("pyftpdlib", "twisted", "vsftpd", "proftpd", "pureftpd", "tpd", "go-http", "nginx", "node-http",
                 "uvicorn", "netty", "external")


class LocalBackend:
    """Runs servers as local child processes (see :mod:`runner.backends.local`).

    Args:
        progress: called with one-line progress messages (venv creation, downloads, builds).
        auto_fetch: fetch missing vsftpd/proftpd/pure-ftpd binaries into the cache on check().
        keep_run_dirs: leave run dirs (logs, configs, files) after stop().
        ready_timeout: seconds to wait for greeting+login (None: the recipe's default, 20 s).
        stop_timeout: seconds between SIGTERM and SIGKILL in stop().
        host: the IPv4 address the servers bind and are reached at (default 127.0.0.1;
            ``xferlab serve`` on a server host of a multi-host campaign gives its ``--bind``).
    """

    name = "local"

    def __init__(self, *, progress: Progress | None = None, auto_fetch: bool = True,
                 keep_run_dirs: bool = False, ready_timeout: float | None = None,
                 stop_timeout: float = 5.0, host: str = "127.0.0.1"):
        self.progress: Progress = progress or (lambda _m: None)
        self.auto_fetch = auto_fetch
        self.keep_run_dirs = keep_run_dirs
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.host = host
        self._recipes: dict[str, Recipe] = {r.name: r(self) for r in RECIPES}

    def _recipe(self, req: ServerRequest) -> Recipe:
        r = self._recipes.get(req.name)
        if r is None:
            raise ServerSkipped(f"unknown server {req.name!r}; known: {', '.join(KNOWN_SERVERS)}")
        return r

    def check(self, req: ServerRequest) -> None:
        """Raise ServerSkipped with the reason when ``req`` cannot run here. May create a
        venv, fetch a Debian package or build tpd (all cached). For ``external``: raises
        ServerSkipped if host/port are missing or it does not answer a login."""
        if req.name == "external":
            check_external(req)
            return
        recipe = self._recipe(req)
        self.check_variant(req)
        recipe.check(req)

    @staticmethod
    def check_variant(req: ServerRequest) -> None:
        """Raise ServerSkipped when ``req.variant`` has a key this backend cannot apply
        (docker-only keys such as ``memory``, ``network``; see runner.backends.variants)."""
        reason = variants.backend_problem(req.name, req.variant, "local") or \
            tls_skip_reason(req.name, str(req.variant.get("tls", "none")))
        if reason:
            raise ServerSkipped(reason)

    def start(self, req: ServerRequest, *, cpu: list[int] | None = None) -> LocalServerHandle | ExternalHandle:
        """Start ``req`` (pinned to ``cpu`` if given) and wait for greeting + login.

        Returns:
            LocalServerHandle (ExternalHandle for ``external``).

        Raises:
            ServerSkipped: cannot run here (see check()).
            ServerFailed: started but did not answer in time or exited; message has the
                log tail.
        """
        if req.name == "external":
            return start_external(req, self.ready_timeout)
        recipe = self._recipe(req)
        self.check_variant(req)
        recipe.check(req)
        last_err: Exception | None = None
        for _attempt in range(2):  # second try only for a port grabbed between probe and bind
            run = RunDir.create(req.name, str(req.variant.get("storage", "disk")))
            try:
                port = free_port(self.host)
                launch = recipe.launch(req, run, port)
                return spawn(req, launch, run, cpu, keep_run_dir=self.keep_run_dirs,
                             stop_timeout=self.stop_timeout, ready_timeout=self.ready_timeout)
            except ServerFailed as e:
                last_err = e
                if not self.keep_run_dirs:
                    shutil.rmtree(run.path, ignore_errors=True)
                if "in use" not in str(e).lower():
                    raise
            except BaseException:
                if not self.keep_run_dirs:
                    shutil.rmtree(run.path, ignore_errors=True)
                raise
        assert last_err is not None
        raise last_err


def available_servers(backend: LocalBackend | None = None) -> list[tuple[str, str | None]]:
    """Each known local server and None when it can run here, else the reason it is
    skipped, e.g. ``[("pyftpdlib", None), ("tpd", "tpd: .../Makefile not found ...")]``.
    Cheap: downloads and builds nothing (a server fetched/built on first use is reported
    with a reason saying so). ``external`` is not listed (it needs a spec)."""
    b = backend or LocalBackend(auto_fetch=False)
    out: list[tuple[str, str | None]] = []
    for name, r in b._recipes.items():
        try:
            out.append((name, r.quick_check()))
        except ServerSkipped as e:
            out.append((name, str(e)))
    return out
