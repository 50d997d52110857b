"""The docker backend: images, container start and readiness (see :mod:`runner.backends.docker`)."""
from __future__ import annotations

import resource
import secrets
from collections.abc import Callable
from typing import Any

import docker
import docker.errors

from runner.backends.base import MachineLacks, ServerFailed, ServerSkipped, target_tls
from runner.backends.docker.container import FTP_HOME, FTP_USER, NETWORK_MODES, ContainerSettings, container_spec
from runner.backends.docker.handle import DockerServerHandle, home_path
from runner.backends.docker.reaping import LABEL, owner_labels, reap_orphans
from runner.backends.external import check_external, start_external
from runner.backends.probe import ProbeError, wait_http_ready, wait_ready
from runner.backends.system import free_port, nofile_target
from runner.catalogue.servers import DOCKER_HTTPS_SERVERS, tls_skip_reason
from runner.config import get_settings
from runner.load.target import Target
from runner.net.conditions import LinkSpec
from runner.net.netns import can_join_netns
from runner.spec.request import ServerRequest

Progress = Callable[[str], None]

#: RLIMIT_NOFILE the engine accepted, by the value first asked (see DockerBackend._run).
_NOFILE_OK: dict[int, int] = {}


class DockerBackend:
    """Runs each server in its own container (see :mod:`runner.backends.docker`).

    Args:
        progress: one-line progress messages (image builds).
        client: a docker.DockerClient (default: ``docker.from_env()``).
        network: ``netns`` (default; env XFERLAB_DOCKER_NETWORK), ``bridge`` or ``host``
            (:data:`~.spec.NETWORK_MODES`); a variant's ``network`` key overrides it per
            server. ``netns`` needs CAP_SYS_ADMIN to join the server's namespace: without
            it the backend uses ``bridge`` and says so through ``progress``.
        ready_timeout: seconds to wait for greeting + login (default 30).
        stop_timeout: seconds between SIGTERM and SIGKILL in stop() (0: kill at once).
        labels: extra labels on containers and volumes (tests use them to clean up);
            also read from XFERLAB_DOCKER_LABELS (``k=v,k=v``).
        build: build missing/outdated images in check()/start() (else ServerSkipped).
        bind: with host networking, the address the server listens on and announces in
            passive replies (default 127.0.0.1; ``xferlab serve --backend docker`` on a
            server host of a multi-host campaign gives that host's address).
        run_overrides: keyword arguments of ``containers.run`` to set (value None:
            remove) on every container, e.g. ``{"security_opt": ["seccomp=unconfined"]}``
            or ``{"mem_limit": None, "memswap_limit": None}``; for measuring what each
            part of the container costs (benchmarks/containers_cost.py --isolate), not
            for campaigns (recorded in build_info ``run_overrides``).

    Raises:
        RuntimeError: no Docker engine answers (``resolve_backend("auto")`` then falls
            back to the local backend).
    """

    name = "docker"

    def __init__(self, *, progress: Progress | None = None, client=None, network: str | None = None,
                 ready_timeout: float = 30.0, stop_timeout: float = 2.0, labels: dict[str, str] | None = None,
                 build: bool = True, bind: str = "127.0.0.1", run_overrides: dict[str, Any] | None = None):
        self.progress: Progress = progress or (lambda _m: None)
        if client is None:
            try:
                client = docker.from_env(timeout=120)
                client.ping()
            except Exception as e:
                raise RuntimeError(f"docker backend: no Docker engine answers ({type(e).__name__}: {e})") from e
        self.client = client
        settings = get_settings()
        self.network = network or settings.docker_network
        if self.network not in NETWORK_MODES:
            raise ValueError(f"docker backend: network {self.network!r}: want one of {', '.join(NETWORK_MODES)}")
        self._netns_refused = can_join_netns()
        if self.network == "netns" and self._netns_refused:
            self.progress(f"docker backend: network netns unavailable ({self._netns_refused}); using bridge: "
                          "the load generator reaches each server through Docker's bridge, which costs "
                          "throughput (docs/containers.md)")
            self.network = "bridge"
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.bind = bind
        self.run_overrides = dict(run_overrides or {})
        self.labels = {**settings.docker_labels, **(labels or {})}
        self.build = build
        self._images: dict[tuple[str, str | None], tuple[str, str, bool]] = {}
        self._image_errors: dict[tuple[str, str | None], str] = {}
        self._sources: dict[tuple[str, str, str | None], Any] = {}  # (name, source, ref) -> SourceImage
        reaped = reap_orphans(self.client)
        if reaped:
            self.progress(f"removed {reaped} server container(s) left by a killed xferlab process")

    # ------------------------------------------------------------------ images

    def image(self, req: ServerRequest) -> tuple[str, str, bool]:
        """(tag, image ID, built now) for ``req``, building it when missing or outdated
        (once per backend instance). Raises ServerSkipped with the build error of a
        release's image; for a server built from source (:meth:`source_image`) ServerFailed."""
        from runner.backends.docker import images

        if req.source is not None:
            got_src = self.source_image(req)
            return got_src.tag, got_src.image_id, got_src.built
        key = (req.name, req.version)
        if key in self._images:
            return self._images[key]
        if key in self._image_errors:  # prepare() tried and failed: same reason, no second build
            raise ServerSkipped(f"{req.label}: {self._image_errors[key]}")
        if req.name not in images.SERVER_IMAGES:
            raise ServerSkipped(f"docker: no image for server {req.name!r}; "
                                f"known: {', '.join(images.SERVER_IMAGES)}")
        try:
            if self.build:
                got = images.ensure_server_image(req.name, req.version, client=self.client,
                                                 progress=self.progress)
            else:
                tag = images.server_tag(req.name, req.version)
                try:
                    got = (tag, self.client.images.get(tag).id, False)
                except docker.errors.ImageNotFound as e:
                    raise images.ImageError(f"image {tag} missing; run `xferlab images build "
                                            f"{req.name}{'=' + req.version if req.version else ''}`") from e
        except images.ImageError as e:
            raise ServerSkipped(f"{req.label}: {e}") from e
        self._images[key] = got
        return got

    def source_image(self, req: ServerRequest):
        """The :class:`runner.backends.docker.images.source.SourceImage` of ``req`` built from
        its ``source`` at its ``ref`` (once per backend instance). Raises ServerFailed when
        the ref does not resolve or the image does not build (the build log's last lines),
        ServerSkipped for a server whose image is not built from source here (vsftpd,
        pure-ftpd: the local backend builds them)."""
        from runner.backends.docker.images import ImageError
        from runner.backends.docker.images.source import SOURCE_IMAGES, ensure_source_image

        assert req.source is not None
        if req.name not in SOURCE_IMAGES:
            raise ServerSkipped(f"{req.label}: docker builds no {req.name} image from source "
                                f"(images from source: {', '.join(SOURCE_IMAGES)}); backend: local builds it")
        key = (req.name, req.source, req.ref)
        if key not in self._sources:
            try:
                self._sources[key] = ensure_source_image(req.name, req.source, req.ref, client=self.client,
                                                         progress=self.progress)
            except ImageError as e:
                raise ServerFailed(f"{req.label}: {e}") from e
        return self._sources[key]

    def prepare(self, reqs: list[ServerRequest]) -> None:
        """Build, before a campaign's first cell, every image ``reqs`` need (in order,
        duplicates once; ``external`` and servers without an image are left to
        check()), reporting through ``self.progress``: ``building image NAME i/n``, then
        each build step (:func:`runner.backends.docker.images.ensure_server_images`). A failed build is
        remembered: check()/start() of that server raise ServerSkipped with its reason
        without building again. Does nothing when the backend does not build (``build=False``).
        Raises nothing for a failed image or a missing base (both become that server's
        skip reason)."""
        from runner.backends.docker import images

        if not self.build:
            return
        wanted = [(r.name, r.version) for r in reqs if r.source is None
                  and r.name in images.SERVER_IMAGES and (r.name, r.version) not in self._images]
        if not wanted:
            return
        try:
            got = images.ensure_server_images(wanted, client=self.client, progress=self.progress)
        except images.ImageError as e:  # base image missing and not makeable: every server says why
            for key in wanted:
                self._image_errors[key] = str(e)
            return
        for key, res in got.items():
            if isinstance(res, images.ImageError):
                self._image_errors[key] = str(res)
            else:
                self._images[key] = res

    def check(self, req: ServerRequest) -> None:
        """Raise ServerSkipped when ``req`` cannot run in a container here (unknown
        server, version not buildable, image build failed, variant ``network: netns``
        where this process may not join a namespace). Builds the image if needed.
        ``external`` servers are checked as the local backend does."""
        if req.name == "external":
            check_external(req)
            return
        if req.variant.get("network") == "netns" and self._netns_refused:
            raise ServerSkipped(f"{req.label}: variant network=netns: {self._netns_refused}")
        link_check(req, self.network)
        _tls_problem(req)
        self.image(req)

    # ------------------------------------------------------------------ start

    def _run(self, kwargs: dict[str, Any], name: str, info: dict[str, Any]):
        """Create and start the container of ``kwargs`` (``containers.create`` then
        ``start``: never ``containers.run``, which pulls an image it does not find, and
        no image is pulled here), lowering RLIMIT_NOFILE when the engine may not raise it
        that far (its own hard limit caps what runc can set without CAP_SYS_RESOURCE):
        tries ``min(fs.nr_open, 1048576)``, then this process's hard limit, then 65536,
        20000.

        Raises:
            ServerFailed: the image is not in the engine (removed after it was built);
                the message names it and the command that builds it.
            docker.errors.APIError: the engine refused the container for another reason.
        """
        wanted = kwargs["ulimits"][0].hard
        tries = [wanted] + sorted({v for v in (resource.getrlimit(resource.RLIMIT_NOFILE)[1], 65536, 20000)
                                   if 0 < v < wanted}, reverse=True)
        if _NOFILE_OK.get(wanted) in tries:  # what worked last time in this process
            tries = tries[tries.index(_NOFILE_OK[wanted]):]
        last: Exception | None = None
        for n in tries:
            kwargs["ulimits"] = [docker.types.Ulimit(name="nofile", soft=n, hard=n)]
            try:
                c = self.client.containers.create(**kwargs)
                c.start()
                info["rlimit_nofile"] = [n, n]
                _NOFILE_OK[wanted] = n
                return c
            except docker.errors.ImageNotFound as e:
                image = info.get("image_tag") or kwargs["image"]
                server = kwargs.get("labels", {}).get("xferlab.server", "SERVER")
                raise ServerFailed(f"image {image} ({kwargs['image']}) is not in the docker engine "
                                   f"(removed after it was built?); images are never pulled: "
                                   f"run `xferlab images build {server}`") from e
            except docker.errors.APIError as e:
                last = e
                try:
                    self.client.containers.get(name).remove(force=True, v=True)
                except docker.errors.APIError:
                    pass
                if "rlimit" not in str(e).lower():
                    raise
        assert last is not None
        raise last

    def settings(self, server: str) -> ContainerSettings:
        """This backend's side of a container for ``server`` (:class:`ContainerSettings`):
        default network, bind address, labels (``xferlab=server``, ``xferlab.server``,
        the owner's, then the extra ones) and the RLIMIT_NOFILE to ask for."""
        return ContainerSettings(network=self.network, bind=self.bind,
                                 labels={LABEL: "server", "xferlab.server": server, **owner_labels(),
                                         **self.labels},
                                 nofile=nofile_target())

    def start(self, req: ServerRequest, *, cpu: list[int] | None = None):
        """Start ``req`` in a fresh container (pinned to ``cpu`` if given), wait for
        greeting + login (an HTTP-only server: any HTTP reply), return a
        :class:`DockerServerHandle` (an HTTP-only server's ``target.port`` is 0 and its
        ``target.root`` the container's home seen through ``/proc/<pid>/root`` when this
        process may enter it).

        Raises:
            ServerSkipped: see check().
            ServerFailed: the container did not start or answer within ready_timeout;
                the message has the container's log tail.
        """
        if req.name == "external":
            return start_external(req, None)
        if req.variant.get("network") == "netns" and self._netns_refused:
            raise ServerSkipped(f"{req.label}: variant network=netns: {self._netns_refused}")
        link = link_check(req, self.network)
        _tls_problem(req)
        from runner.backends.docker import images

        tag, image_id, built = self.image(req)
        script = images.SERVER_IMAGES[req.name].entrypoint_script
        try:
            entrypoint = script.read_text() if script is not None else None
        except OSError as e:
            raise ServerSkipped(f"{req.label}: container entrypoint {script} unreadable: {e}") from e
        settings = self.settings(req.name)
        name = f"xferlab-{req.name}-{secrets.token_hex(4)}"
        password = secrets.token_hex(8)
        spec = container_spec(req, settings, image_id=image_id, image_tag=tag, built=built, name=name,
                              password=password, pick_port=lambda: free_port(self.bind), cpu=cpu,
                              entrypoint=entrypoint)
        info = spec.info
        if self.run_overrides:
            for k, v in self.run_overrides.items():
                if v is None:
                    spec.kwargs.pop(k, None)
                else:
                    spec.kwargs[k] = v
            info["run_overrides"] = {k: v for k, v in self.run_overrides.items()}
        if spec.volume:
            self.client.volumes.create(name=spec.volume, labels=spec.labels)
        try:
            container = self._run(spec.kwargs, name, info)
        except (docker.errors.APIError, ServerFailed) as e:
            if spec.volume:
                try:
                    self.client.volumes.get(spec.volume).remove(force=True)
                except docker.errors.APIError:
                    pass
            try:
                self.client.containers.get(name).remove(force=True, v=True)
            except docker.errors.APIError:
                pass
            if isinstance(e, ServerFailed):
                raise ServerFailed(f"{req.label}: {e}") from e
            raise ServerFailed(f"{req.label}: docker could not start {tag}: {e.explanation or e}") from e
        port = spec.port
        handle = DockerServerHandle(self.client, container,
                                    Target(spec.bind if spec.network == "host" else "127.0.0.1", port, FTP_USER,
                                           password, tls=target_tls(req)), info, spec.volume,
                                    stop_timeout=self.stop_timeout)
        try:
            handle._attach_pid()
            handle.record_storage_fs(FTP_HOME)
            if info["storage"] == "disk" and handle.build_info["storage_fs"] in ("tmpfs", "ramfs"):
                # as the local backend: a "disk" home in memory would be measured as disk
                raise ServerSkipped(f"{req.label}: storage disk: the container's {FTP_HOME} (a named volume) is on "
                                    f"{handle.build_info['storage_fs']}: docker's data root is in memory here")
            if port == 0:  # HTTP only: no login; the home through /proc when this process may enter it
                password = ""
            root = home_path(handle.pid) if port == 0 else None
            if spec.network in ("bridge", "netns"):
                ip = handle.bridge_address()
                if not ip:
                    raise ServerFailed(f"{req.label}: container {name} has no IP address on the bridge")
                # netns: the same address, reached from inside the container's namespace,
                # is a local address there: the kernel loops it back without the veth
                handle.target = Target(ip, port, FTP_USER, password, root, http_port=spec.http_port,
                                       netns=f"/proc/{handle.pid}/ns/net" if spec.network == "netns" else None,
                                       tls=target_tls(req))
            elif spec.http_port is not None:
                handle.target = Target(spec.bind, port, FTP_USER, password, root, http_port=spec.http_port,
                                       tls=target_tls(req))
            t = handle.target
            if t.speaks_ftp:
                greeting, waited = wait_ready(t.host, t.port, t.user, t.password, timeout=self.ready_timeout,
                                              alive=handle.alive, tls=t.tls)
            else:
                assert t.http_port is not None
                greeting, waited = wait_http_ready(t.host, t.http_port, timeout=self.ready_timeout,
                                                   alive=handle.alive, tls=t.tls)
            if not link.loopback:
                link_container(req, handle, link)
        except (ProbeError, ServerFailed, docker.errors.APIError) as e:
            tail = handle.log_tail()
            why = handle._exit or ""
            handle.stop()
            raise ServerFailed(f"{req.label}: {e}" + (f" ({why})" if why else "")
                               + f"\ncontainer {name} ({tag}) log tail:\n{tail or '(empty)'}") from e
        except BaseException:
            handle.stop()
            raise
        info.update({"greeting": greeting, "startup_s": round(waited, 3), "pid": handle.pid,
                     "container": container.id[:12], "container_name": name})
        try:
            code, out = container.exec_run(["cat", "/opt/server-version"])
            if code == 0:
                info["version"] = out.decode().strip()
        except docker.errors.APIError:
            pass
        if req.source is not None:  # one build row per commit: the commit in the version (as the local backend)
            src = self.source_image(req).source
            info["version"] = f"{info['version']}+g{src.short}" if info.get("version") else f"git-{src.short}"
            info["source"] = src.info()
        elif not info.get("version"):  # no /opt/server-version (tpd): the source tree's hash
            chash = (self.client.images.get(image_id).labels or {}).get("xferlab.context_hash")
            info["version"] = req.version or (f"src-{chash}" if chash else None)
        return handle


def link_check(req: ServerRequest, network: str) -> LinkSpec:
    """The link of ``req`` (runner.net.conditions; loopback when none). Raises
    ServerSkipped when a shaped link cannot be made here (linknet.link_problem;
    MachineLacks when not root or without netem), or
    with host networking: the link's server end goes into the container's own network
    namespace, which a host-network container does not have."""
    from runner.backends.base import request_link
    from runner.net.link import link_problem, link_problem_is_the_machine

    link = request_link(req)
    if link.loopback:
        return link
    if str(req.variant.get("network", network)) == "host":
        raise ServerSkipped(f"{req.label}: link {link.text()} needs the container's own network namespace "
                            "(network netns or bridge), not host networking")
    why = link_problem(link)
    if why:
        raise (MachineLacks if link_problem_is_the_machine(link) else ServerSkipped)(f"{req.label}: {why}")
    return link


def link_container(req: ServerRequest, handle: DockerServerHandle, link: LinkSpec) -> None:
    """Put the server end of a new shaped link into the running container's network
    namespace (runner.net.link.open_link with its pid) and point the handle's
    target at it: the server end's address, from the link's client namespace. The
    container keeps its bridge interface (the readiness probe used it); the load
    reaches the server only over the link. The handle's stop() deletes the link.

    Raises:
        ServerSkipped: the link cannot be made here (LinkUnavailable).
        ServerFailed: a command making it failed, or the container's namespace is this
            process's own (it must never get the veth).
    """
    import os

    from runner.net.link import LinkFailed, LinkUnavailable, attach_link, open_link

    assert handle.pid is not None
    try:
        if os.readlink(f"/proc/{handle.pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            raise ServerFailed(f"{req.label}: the container shares this process's network namespace: no link")
        net = open_link(link, server_pid=handle.pid)
    except OSError as e:
        raise ServerFailed(f"{req.label}: the container's network namespace: {e}") from e
    except LinkUnavailable as e:
        raise ServerSkipped(f"{req.label}: {e}") from None
    except LinkFailed as e:
        raise ServerFailed(f"{req.label}: the link could not be made: {e}") from None
    attach_link(handle, net)


def _tls_problem(req: ServerRequest) -> None:
    """ServerSkipped when the server has no TLS of the requested mode (catalogue), or the
    mode is ``https`` and the server's container does not serve it
    (catalogue.DOCKER_HTTPS_SERVERS; the others do HTTPS on the local backend only)."""
    mode = str(req.variant.get("tls", "none"))
    why = tls_skip_reason(req.name, mode)
    if why is None and mode == "https" and req.name not in DOCKER_HTTPS_SERVERS:
        why = (f"{req.label}: tls=https runs on the local backend only for {req.name} (its container's "
               f"HTTPS is not wired: catalogue.DOCKER_HTTPS_SERVERS)")
    if why:
        raise ServerSkipped(why)
