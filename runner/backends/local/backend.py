"""The local backend: runs each server as a child process on this machine."""
from __future__ import annotations

import copy
import shutil
from collections.abc import Callable

from runner.backends.base import MachineLacks, ServerFailed, ServerSkipped, request_link
from runner.backends.external import ExternalHandle, check_external, start_external
from runner.backends.local.process import LocalServerHandle, spawn
from runner.backends.local.recipes import RECIPES, Recipe
from runner.backends.local.rundir import RunDir
from runner.backends.system import free_port
from runner.catalogue import variants
from runner.catalogue.servers import SERVER_NAMES, tls_skip_reason
from runner.net.conditions import LinkSpec
from runner.net.link import (
    LinkFailed,
    LinkUnavailable,
    attach_link,
    link_problem,
    link_problem_is_the_machine,
    open_link,
)
from runner.net.netns import call_in_netns
from runner.spec.request import ServerRequest

Progress = Callable[[str], None]

#: Server names this backend knows (``external`` needs ServerRequest.external).


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
            raise ServerSkipped(f"unknown server {req.name!r}; known: {', '.join(SERVER_NAMES)}")
        return r

    def check(self, req: ServerRequest) -> None:
        """Raise ServerSkipped with the reason when ``req`` cannot run here (MachineLacks
        when the machine itself lacks what it needs: root, netem). May create a venv,
        fetch a Debian package or build a server from source (all cached); raises
        ServerFailed with the builder's last lines when a build fails. For ``external``:
        raises ServerSkipped if host/port are missing or it does not answer a login."""
        if req.name == "external":
            check_external(req)
            return
        recipe = self._recipe(req)
        self.check_variant(req)
        recipe.check(req)

    @staticmethod
    def check_variant(req: ServerRequest) -> None:
        """Raise ServerSkipped when ``req.variant`` has a key this backend cannot apply
        (docker-only keys such as ``memory``, ``network``; see runner.catalogue.variants),
        a TLS mode the server does not have, or a link that cannot be made here
        (runner.net.link.link_problem: not root, no ip/tc, no netem for a delay or
        a loss; MachineLacks when not root or without netem)."""
        reason = variants.backend_problem(req.name, req.variant, "local") or \
            tls_skip_reason(req.name, str(req.variant.get("tls", "none")))
        machine = False
        if reason is None:
            link = request_link(req)
            reason = link_problem(link)
            machine = link_problem_is_the_machine(link)
        if reason:
            raise (MachineLacks if machine else ServerSkipped)(
                f"{req.label}: {reason}" if not reason.startswith(req.name) else reason)

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
        link = request_link(req)
        last_err: Exception | None = None
        for _attempt in range(2):  # second try only for a port grabbed between probe and bind
            run = RunDir.create(req.name, str(req.variant.get("storage", "disk")))
            try:
                if not link.loopback:
                    return self._start_linked(req, recipe, run, cpu, link)
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

    def _start_linked(self, req: ServerRequest, recipe: Recipe, run: RunDir, cpu: list[int] | None,
                      link: LinkSpec) -> LocalServerHandle:
        """Start ``req`` in the server namespace of a new shaped link (runner.net.link):
        the recipe renders its config and picks its ports inside that namespace, bound to
        the server end's address (so PASV replies carry it); the target is that address,
        reached from the client namespace (``Target.netns``). The link is closed by the
        handle's stop(), or here when the start fails."""
        try:
            net = open_link(link)
        except LinkUnavailable as e:
            raise ServerSkipped(f"{req.label}: {e}") from None
        except LinkFailed as e:
            raise ServerFailed(f"{req.label}: the link could not be made: {e}") from None
        try:
            at = copy.copy(recipe)
            at.backend = _LinkHost(net.server.address, self.auto_fetch, self.progress)
            launch = call_in_netns(net.server.path, lambda: at.launch(req, run, free_port(net.server.address)))
            handle = spawn(req, launch, run, cpu, keep_run_dir=self.keep_run_dirs, stop_timeout=self.stop_timeout,
                           ready_timeout=self.ready_timeout, netns=net.server.path)
        except BaseException:
            net.close()
            raise
        attach_link(handle, net)
        return handle


class _LinkHost:
    """The RecipeHost of a recipe launched behind a link: the server end's address."""

    def __init__(self, host: str, auto_fetch: bool, progress: Progress) -> None:
        self.host = host
        self.auto_fetch = auto_fetch
        self.progress = progress


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
