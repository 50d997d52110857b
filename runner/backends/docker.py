"""Docker backend: each server under test in its own container, one container per cell.

``start`` builds or reuses the image for the server and version (:mod:`runner.images`:
``xferlab/<server>:<version or default>``, rebuilt when its build context changes),
runs a container from it, waits until the server answers the 220 greeting and accepts
the login, and returns a :class:`DockerServerHandle`. ``stop`` removes the container and
its storage volume.

Every container gets the same treatment (the point of containers here):

* ``ulimits`` nofile soft = hard = ``min(fs.nr_open, 1048576)``;
* per-container sysctls (own network namespace): :data:`DEFAULT_SYSCTLS`
  (somaxconn, tcp_fin_timeout, tcp_tw_reuse, ip_local_port_range), overridable with
  the variant key ``sysctls``;
* CPU pinning (``cpuset``) from the campaign's server pinning;
* a memory limit (variant ``memory``, default :data:`DEFAULT_MEMORY`, swap disabled);
* storage as an axis (variant ``storage``): ``disk`` (default, a fresh Docker volume
  mounted at the FTP home, removed after the cell) or ``tmpfs`` (variant ``tmpfs_size``,
  default 2g);
* the FTP user's writable home ``/srv/ftp``, passive range 30000-31999, and the
  masquerade address from the variant ``masquerade_address`` (for clients on another host).

Networking (variant ``network`` or the backend's ``network``): ``bridge`` (default)
connects straight to the container's address on Docker's bridge (no port publishing,
no userland proxy on the data path; passive mode works as the server announces its own
address; per-container sysctls apply); ``host`` shares the host's network namespace
(the server binds 127.0.0.1 on a free port, no NAT/veth cost, but no per-container
sysctls). docs/containers.md compares the two.

Memory: ``handle.pid`` is the server as a host PID (the child of the container's
docker-init, whose host PID is ``State.Pid``),
so :class:`runner.metrics.sampler.TreeSampler` follows the server's process tree as it
does for the local backend; :meth:`DockerServerHandle.cgroup_memory` reads the
container's memory cgroup (v2 ``memory.current``/``memory.peak``/``memory.stat`` anon;
v1 ``memory.usage_in_bytes``/``memory.max_usage_in_bytes``/``memory.stat`` total_rss),
falling back to the engine's stats API when the cgroup files are not visible.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any, Callable

from . import variants
from .base import ServerFailed, ServerRequest, ServerSkipped, Target
from .probe import ProbeError, wait_ready

try:
    import docker
    import docker.errors
except ImportError as _e:  # get_backend("docker") -> ImportError -> resolve_backend falls back to local
    raise ImportError("the docker backend needs the Docker SDK for Python (pip install 'docker>=7')") from _e

Progress = Callable[[str], None]

FTP_USER = "xferlab"
#: Control port inside the container (bridge network).
CONTAINER_FTP_PORT = 21
#: Passive range inside the container (bridge network).
PASV_RANGE = (30000, 31999)
#: Per-container sysctls (own network namespace). Chosen so 2,000+ clients and
#: many short connections do not hit the kernel's defaults (somaxconn 4096 is the
#: kernel default since 5.4; older hosts had 128).
DEFAULT_SYSCTLS: dict[str, str] = {
    "net.core.somaxconn": "4096",
    "net.ipv4.tcp_fin_timeout": "15",
    "net.ipv4.tcp_tw_reuse": "1",
    "net.ipv4.ip_local_port_range": "32768 60999",
}
#: Container memory limit unless the variant says otherwise.
DEFAULT_MEMORY = "4g"
#: Label on every container/volume this backend makes (cleanup filters on it).
LABEL = "xferlab"
#: Where the host's cgroup tree is mounted (the compose worker mounts it elsewhere).
CGROUP_ROOT = Path(os.environ.get("XFERLAB_CGROUP_ROOT", "/sys/fs/cgroup"))

#: Capabilities a server needs beyond Docker's default set: pure-ftpd keeps
#: CAP_SYS_NICE and CAP_DAC_READ_SEARCH at startup (its caps.c) and exits with status
#: 252, silently, without them.
SERVER_CAPS: dict[str, list[str]] = {"pureftpd": ["SYS_NICE", "DAC_READ_SEARCH"]}

#: RLIMIT_NOFILE the engine accepted, by the value first asked (see DockerBackend._run).
_NOFILE_OK: dict[int, int] = {}


def _nr_open() -> int:
    try:
        return int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        return 1048576


def _free_port(host: str = "127.0.0.1") -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def cgroup_dir(pid: int, root: Path | None = None) -> tuple[Path, int] | None:
    """The memory cgroup folder of host process ``pid`` and the cgroup version
    (1 or 2), from ``/proc/<pid>/cgroup``; None when it cannot be found under ``root``
    (default :data:`CGROUP_ROOT`)."""
    root = root or CGROUP_ROOT
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for ln in lines:
        parts = ln.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            d = root / "memory" / parts[2].lstrip("/")
            if (d / "memory.usage_in_bytes").exists():
                return d, 1
    for ln in lines:
        if ln.startswith("0::"):
            rel = ln[3:].lstrip("/")
            for d in (root / rel, root / "unified" / rel):
                if (d / "memory.current").exists():
                    return d, 2
    return None


def read_cgroup_memory(d: Path, version: int) -> dict[str, float]:
    """Memory figures of one cgroup, bytes: ``current`` (usage now, page cache
    included), ``peak`` (highest usage since the cgroup was made; absent on v2 kernels
    without memory.peak), ``anon`` (anonymous memory: v2 memory.stat ``anon``, v1
    ``total_rss``). Raises OSError when the files vanished (container gone)."""
    out: dict[str, float] = {}
    if version == 2:
        out["current"] = float((d / "memory.current").read_text())
        if (d / "memory.peak").exists():
            out["peak"] = float((d / "memory.peak").read_text())
        stat_key = "anon"
    else:
        out["current"] = float((d / "memory.usage_in_bytes").read_text())
        out["peak"] = float((d / "memory.max_usage_in_bytes").read_text())
        stat_key = "total_rss"
    for ln in (d / "memory.stat").read_text().splitlines():
        k, _, v = ln.partition(" ")
        if k == stat_key:
            out["anon"] = float(v)
    return out


class DockerServerHandle:
    """A server running in a container started by :class:`DockerBackend`
    (implements base.ServerHandle).

    Attributes:
        target: where to connect (container address on the bridge, or 127.0.0.1 with
            host networking); ``root`` is None: fixtures are uploaded over FTP.
        pid: host PID of the server process (the child of the container's docker-init,
            i.e. its main process), for TreeSampler.
        build_info: name, version, image_id, image_tag, container, network, storage,
            memory_limit, cpuset, sysctls, rlimit_nofile, config_hash, greeting, startup_s.
        container_id: the container's full ID.
    """

    def __init__(self, backend: "DockerBackend", container, target: Target, build_info: dict[str, Any],
                 volume: str | None):
        self._backend = backend
        self._container = container
        self.container_id: str = container.id
        self.target = target
        self.pid: int | None = None
        self.build_info = build_info
        self._volume = volume
        self._stopped = False
        self._cg: tuple[Path, int] | None = None
        self._exit: str | None = None

    def _attach_pid(self, timeout: float = 5.0) -> None:
        """Set ``pid`` to the server process: the child of the container's init
        (``State.Pid``, docker-init), waiting up to ``timeout`` s for the entrypoint to exec it;
        ``State.Pid`` itself when the container runs without init."""
        import psutil

        self._container.reload()
        init_pid = int(self._container.attrs["State"].get("Pid") or 0)
        self.pid = init_pid or None
        self._cg = cgroup_dir(init_pid) if init_pid else None
        if not init_pid or not self._container.attrs["HostConfig"].get("Init"):
            return
        deadline = time.monotonic() + timeout
        for _ in range(200):
            try:
                kids = psutil.Process(init_pid).children()
            except psutil.Error:
                return
            if kids:
                self.pid = kids[0].pid
                return
            if time.monotonic() >= deadline:
                return
            time.sleep(0.025)

    def alive(self) -> bool:
        """True while the container is running (asks the engine)."""
        if self._stopped:
            return False
        try:
            self._container.reload()
        except docker.errors.NotFound:
            self._exit = "container removed"
            return False
        st = self._container.attrs["State"]
        if st.get("Running"):
            return True
        self._exit = (f"container {st.get('Status')} (exit code {st.get('ExitCode')}"
                      + (", OOM-killed" if st.get("OOMKilled") else "") + ")")
        return False

    def exit_reason(self) -> str | None:
        """Why the container is not running (after alive() returned False), e.g.
        ``"container exited (exit code 137)"``; None while running."""
        return None if self.alive() else self._exit

    def cgroup_memory(self) -> dict[str, float]:
        """The container's memory cgroup now, bytes: ``current``, ``peak`` (since the
        container started), ``anon`` (see :func:`read_cgroup_memory`). Falls back to
        the engine's stats API (``memory_stats``: usage, max_usage, stats.rss/anon) when
        the cgroup files are not visible here. Returns {} when the container is gone."""
        if self._cg is not None:
            try:
                return read_cgroup_memory(*self._cg)
            except OSError:
                return {}
        try:
            ms = self._container.stats(stream=False).get("memory_stats") or {}
        except docker.errors.APIError:
            return {}
        out: dict[str, float] = {}
        if "usage" in ms:
            out["current"] = float(ms["usage"])
        if "max_usage" in ms:
            out["peak"] = float(ms["max_usage"])
        st = ms.get("stats") or {}
        for k in ("anon", "total_rss", "rss"):
            if k in st:
                out["anon"] = float(st[k])
                break
        return out

    def log_tail(self, lines: int = 40) -> str:
        """Last ``lines`` lines of the container's stdout+stderr ("" when gone)."""
        try:
            return self._container.logs(tail=lines).decode("utf-8", "replace").strip()
        except docker.errors.APIError:
            return ""

    def stop(self) -> None:
        """Stop (SIGTERM, then SIGKILL after the backend's stop_timeout) and remove
        the container and its volume. Idempotent; never raises for a dead container."""
        if self._stopped:
            return
        self._stopped = True
        if self._backend.stop_timeout > 0:
            try:
                self._container.stop(timeout=max(1, int(self._backend.stop_timeout)))
            except docker.errors.APIError:
                pass
        try:
            self._container.remove(force=True, v=True)
        except docker.errors.APIError:
            pass
        if self._volume:
            for _ in range(20):
                try:
                    self._backend.client.volumes.get(self._volume).remove(force=True)
                    break
                except docker.errors.NotFound:
                    break
                except docker.errors.APIError:  # still in use for a moment after removal
                    time.sleep(0.1)

    def __enter__(self) -> "DockerServerHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class DockerBackend:
    """Runs each server in its own container (see module docstring).

    Args:
        progress: one-line progress messages (image builds).
        client: a docker.DockerClient (default: ``docker.from_env()``).
        network: ``bridge`` (default; env XFERLAB_DOCKER_NETWORK) or ``host``; a
            variant's ``network`` key overrides it per server.
        ready_timeout: seconds to wait for greeting + login (default 30).
        stop_timeout: seconds between SIGTERM and SIGKILL in stop() (0: kill at once).
        labels: extra labels on containers and volumes (tests use them to clean up);
            also read from XFERLAB_DOCKER_LABELS (``k=v,k=v``).
        build: build missing/outdated images in check()/start() (else ServerSkipped).
        bind: with host networking, the address the server listens on and announces in
            passive replies (default 127.0.0.1; ``xferlab serve --backend docker`` on a
            server host of a multi-host campaign gives that host's address).

    Raises:
        RuntimeError: no Docker engine answers (``resolve_backend("auto")`` then falls
            back to the local backend).
    """

    name = "docker"

    def __init__(self, *, progress: Progress | None = None, client=None, network: str | None = None,
                 ready_timeout: float = 30.0, stop_timeout: float = 2.0, labels: dict[str, str] | None = None,
                 build: bool = True, bind: str = "127.0.0.1"):
        self.progress: Progress = progress or (lambda _m: None)
        if client is None:
            try:
                client = docker.from_env(timeout=120)
                client.ping()
            except Exception as e:
                raise RuntimeError(f"docker backend: no Docker engine answers ({type(e).__name__}: {e})") from e
        self.client = client
        self.network = network or os.environ.get("XFERLAB_DOCKER_NETWORK", "bridge")
        if self.network not in ("bridge", "host"):
            raise ValueError(f"docker backend: network {self.network!r}: want 'bridge' or 'host'")
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self.bind = bind
        env_labels = dict(kv.split("=", 1) for kv in os.environ.get("XFERLAB_DOCKER_LABELS", "").split(",")
                          if "=" in kv)
        self.labels = {**env_labels, **(labels or {})}
        self.build = build
        self._images: dict[tuple[str, str | None], tuple[str, str, bool]] = {}
        reaped = reap_orphans(self.client)
        if reaped:
            self.progress(f"removed {reaped} server container(s) left by a killed xferlab process")

    # ------------------------------------------------------------------ images

    def image(self, req: ServerRequest) -> tuple[str, str, bool]:
        """(tag, image ID, built now) for ``req``, building it when missing or outdated
        (once per backend instance). Raises ServerSkipped with the build error."""
        from runner import images

        key = (req.name, req.version)
        if key in self._images:
            return self._images[key]
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

    def check(self, req: ServerRequest) -> None:
        """Raise ServerSkipped when ``req`` cannot run in a container here (unknown
        server, version not buildable, image build failed). Builds the image if needed.
        ``external`` servers are checked as the local backend does."""
        if req.name == "external":
            from .local import LocalBackend
            LocalBackend(auto_fetch=False).check(req)
            return
        self.image(req)

    # ------------------------------------------------------------------ start

    def _run(self, kwargs: dict[str, Any], name: str, info: dict[str, Any]):
        """containers.run, lowering RLIMIT_NOFILE when the engine may not raise it that
        far (its own hard limit caps what runc can set without CAP_SYS_RESOURCE): tries
        ``min(fs.nr_open, 1048576)``, then this process's hard limit, then 65536, 20000."""
        import resource

        wanted = kwargs["ulimits"][0].hard
        tries = [wanted] + sorted({v for v in (resource.getrlimit(resource.RLIMIT_NOFILE)[1], 65536, 20000)
                                   if 0 < v < wanted}, reverse=True)
        if _NOFILE_OK.get(wanted) in tries:  # what worked last time in this process
            tries = tries[tries.index(_NOFILE_OK[wanted]):]
        last: Exception | None = None
        for n in tries:
            kwargs["ulimits"] = [docker.types.Ulimit(name="nofile", soft=n, hard=n)]
            try:
                c = self.client.containers.run(**kwargs)
                info["rlimit_nofile"] = [n, n]
                _NOFILE_OK[wanted] = n
                return c
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

    def start(self, req: ServerRequest, *, cpu: list[int] | None = None):
        """Start ``req`` in a fresh container (pinned to ``cpu`` if given), wait for
        greeting + login, return a :class:`DockerServerHandle`.

        Raises:
            ServerSkipped: see check().
            ServerFailed: the container did not start or answer within ready_timeout;
                the message has the container's log tail.
        """
        if req.name == "external":
            from .local import LocalBackend
            return LocalBackend(auto_fetch=False).start(req, cpu=cpu)
        from runner import images

        tag, image_id, built = self.image(req)
        var = dict(req.variant)
        network = str(var.get("network", self.network))
        if network not in ("bridge", "host"):
            raise ServerSkipped(f"{req.label}: variant network={network!r}: want 'bridge' or 'host'")
        storage = str(var.get("storage", "disk"))
        if storage not in ("disk", "tmpfs"):
            raise ServerSkipped(f"{req.label}: variant storage={storage!r}: want 'disk' or 'tmpfs'")
        memory = str(var.get("memory", DEFAULT_MEMORY))
        password = secrets.token_hex(8)
        if network == "host":
            port = _free_port(self.bind)
            lo = 10000 + (port * 7919) % 20 * 1000  # a window away from the ephemeral range
            pasv = (lo, lo + 999)
            bind = self.bind
        else:
            port, pasv, bind = CONTAINER_FTP_PORT, PASV_RANGE, "0.0.0.0"
        if var.get("pasv_ports"):
            try:
                pasv = variants.parse_port_range(var["pasv_ports"])
            except ValueError as e:
                raise ServerSkipped(f"{req.label}: invalid pasv_ports: {e}") from None
        env = {"FTP_USER": FTP_USER, "FTP_PASSWORD": password, "FTP_HOST": bind, "FTP_PORT": str(port),
               "PASV_MIN": str(pasv[0]), "PASV_MAX": str(pasv[1]), "MAX_CLIENTS": str(req.max_clients),
               "USE_SENDFILE": "1" if var.get("use_sendfile", True) else "0",
               "BACKLOG": str(int(var.get("backlog", 1024))),
               "IDLE_TIMEOUT": str(int(var.get("idle_timeout", 300)))}
        if var.get("masquerade_address"):
            env["PASV_ADDRESS"] = str(var["masquerade_address"])
        if req.name == "tpd":
            env["HTTP_PORT"] = str(_free_port(self.bind) if network == "host" else 8080)
        nofile = min(_nr_open(), 1048576)
        sysctls = {**DEFAULT_SYSCTLS, **{k: str(v) for k, v in (var.get("sysctls") or {}).items()}}
        labels = {LABEL: "server", "xferlab.server": req.name, **owner_labels(), **self.labels}
        name = f"xferlab-{req.name}-{secrets.token_hex(4)}"
        kwargs: dict[str, Any] = dict(
            image=image_id, name=name, detach=True, environment=env, labels=labels,
            ulimits=[docker.types.Ulimit(name="nofile", soft=nofile, hard=nofile)],
            mem_limit=memory, memswap_limit=memory, stop_signal="SIGTERM",
            # docker-init as PID 1: servers are not written to be PID 1 (vsftpd 3.0.3 as
            # PID 1 dies with SIGSEGV when a passive session is dropped); handle.pid is
            # the server itself, init's child, so memory figures do not include init.
            init=True)
        script = images.SERVER_IMAGES[req.name].entrypoint_script
        if script is not None:  # the image's own ENTRYPOINT is not xferlab's interface
            try:
                kwargs["entrypoint"] = ["/bin/sh", "-c", script.read_text(), "xferlab-entrypoint"]
            except OSError as e:
                raise ServerSkipped(f"{req.label}: container entrypoint {script} unreadable: {e}") from e
        if req.name in SERVER_CAPS:
            kwargs["cap_add"] = SERVER_CAPS[req.name]
        if cpu:
            kwargs["cpuset_cpus"] = ",".join(str(c) for c in cpu)
        if network == "host":
            kwargs["network_mode"] = "host"
            sysctls = {}
        else:
            kwargs["sysctls"] = sysctls
        volume = None
        if storage == "tmpfs":
            kwargs["tmpfs"] = {"/srv/ftp": f"size={var.get('tmpfs_size', '2g')},mode=0755"}
        else:
            volume = f"{name}-home"
            self.client.volumes.create(name=volume, labels=labels)
            kwargs["volumes"] = {volume: {"bind": "/srv/ftp", "mode": "rw"}}
        cfg = {k: v for k, v in env.items() if k not in ("FTP_PASSWORD", "FTP_PORT", "HTTP_PORT")}
        cfg.update({"image": image_id, "network": network, "storage": storage, "memory": memory,
                    "sysctls": sysctls, "nofile": nofile})
        info: dict[str, Any] = {
            "name": req.name, "label": req.label, "variant": dict(req.variant), "requested_version": req.version,
            "backend": "docker", "image_id": image_id, "image_tag": tag,
            "obtained": f"image {tag}" + (" (built now)" if built else " (cached)"),
            "binary": None, "interpreter": None, "network": network, "storage": storage,
            "memory_limit": memory, "cpu": list(cpu) if cpu else None, "cpuset": kwargs.get("cpuset_cpus"),
            "sysctls": sysctls, "rlimit_nofile": [nofile, nofile], "max_clients": req.max_clients,
            "pasv_ports": list(pasv), "config_hash": hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest(),
        }
        try:
            container = self._run(kwargs, name, info)
        except docker.errors.APIError as e:
            if volume:
                try:
                    self.client.volumes.get(volume).remove(force=True)
                except docker.errors.APIError:
                    pass
            try:
                self.client.containers.get(name).remove(force=True, v=True)
            except docker.errors.APIError:
                pass
            raise ServerFailed(f"{req.label}: docker could not start {tag}: {e.explanation or e}") from e
        handle = DockerServerHandle(self, container, Target(bind if network == "host" else "127.0.0.1", port,
                                                            FTP_USER, password), info, volume)
        try:
            handle._attach_pid()
            if network == "bridge":
                ip = container.attrs["NetworkSettings"].get("IPAddress") or ""
                if not ip:
                    nets = container.attrs["NetworkSettings"].get("Networks") or {}
                    ip = next((n.get("IPAddress") for n in nets.values() if n.get("IPAddress")), "")
                if not ip:
                    raise ServerFailed(f"{req.label}: container {name} has no IP address on the bridge")
                handle.target = Target(ip, port, FTP_USER, password,
                                       http_port=int(env["HTTP_PORT"]) if "HTTP_PORT" in env else None)
            elif "HTTP_PORT" in env:
                handle.target = Target(bind, port, FTP_USER, password, http_port=int(env["HTTP_PORT"]))
            t = handle.target
            greeting, waited = wait_ready(t.host, t.port, t.user, t.password, timeout=self.ready_timeout,
                                          alive=handle.alive)
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
        if not info.get("version"):  # no /opt/server-version (tpd): the source tree's hash
            chash = (self.client.images.get(image_id).labels or {}).get("xferlab.context_hash")
            info["version"] = req.version or (f"src-{chash}" if chash else None)
        return handle


def owner_labels() -> dict[str, str]:
    """Labels naming the xferlab process that starts a container: host name, PID and
    the process's start time (so a reused PID is not taken for the owner)."""
    import socket

    import psutil

    return {"xferlab.owner_host": socket.gethostname(), "xferlab.owner_pid": str(os.getpid()),
            "xferlab.owner_started": f"{psutil.Process().create_time():.2f}"}


def reap_orphans(client) -> int:
    """Remove the server containers (and their volumes) that an xferlab process on
    this host started and can no longer stop because it is gone (killed with SIGKILL,
    the machine's OOM killer...): their ``xferlab.owner_pid`` process no longer exists
    or was started at another time than ``xferlab.owner_started``. Containers of live
    owners and of other hosts are left alone. Returns how many containers were removed.
    Called whenever a DockerBackend is made, so the next campaign cleans up."""
    import socket

    import psutil

    host = socket.gethostname()

    def dead(labels: dict[str, str]) -> bool:
        if labels.get("xferlab.owner_host") != host or not labels.get("xferlab.owner_pid", "").isdigit():
            return False
        try:
            started = psutil.Process(int(labels["xferlab.owner_pid"])).create_time()
        except psutil.NoSuchProcess:
            return True
        except psutil.Error:
            return False
        return f"{started:.2f}" != labels.get("xferlab.owner_started")

    return _remove(client, {"label": [f"{LABEL}=server", "xferlab.owner_host"]}, dead)


def _remove(client, flt: dict[str, Any], want: Callable[[dict[str, str]], bool]) -> int:
    """Remove the containers, then the volumes, matching the engine filter ``flt`` whose
    labels satisfy ``want``; errors of single removals are ignored (a volume may still be
    in use). Returns how many containers were removed."""
    n = 0
    for c in client.containers.list(all=True, filters=flt):
        if want(c.labels or {}):
            try:
                c.remove(force=True, v=True)
                n += 1
            except docker.errors.APIError:
                pass
    for v in client.volumes.list(filters=flt):
        if want(v.attrs.get("Labels") or {}):
            try:
                v.remove(force=True)
            except docker.errors.APIError:
                pass
    return n


def cleanup(client=None, *, label: str = LABEL, value: str | None = None) -> int:
    """Remove containers and volumes labelled ``label`` (``label=value`` if given).
    Returns how many containers were removed. For test fixtures and `xferlab images`."""
    client = client or docker.from_env()
    return _remove(client, {"label": f"{label}={value}" if value is not None else label}, lambda _labels: True)
