"""The container a server runs in, as a pure function: request + settings -> the
keyword arguments of ``docker.containers.run`` and the build_info they imply. No
engine is asked; :class:`~runner.backends.docker.DockerBackend` runs the result."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docker.types

from runner.backends.base import ServerSkipped, tls_mode
from runner.catalogue import variants
from runner.catalogue.servers import DEFAULT_MAX_BODY, SERVER_PROTOCOLS
from runner.spec.request import ServerRequest

FTP_USER = "xferlab"
#: Control port inside the container (bridge network).
CONTAINER_FTP_PORT = 21
#: HTTP port inside the container (bridge network; tpd and the HTTP-only servers).
CONTAINER_HTTP_PORT = 8080
#: Passive range inside the container (bridge network).
PASV_RANGE = (30000, 31999)
#: Where the campaign's certificate folder (runner.tls.certs) is mounted, read-only.
TLS_DIR = "/etc/xferlab/tls"
#: tpd's implicit FTPS listener in the container (``--ftps-listen``; IANA's ftps port).
CONTAINER_FTPS_PORT = 990
#: Per-container sysctls (own network namespace). Chosen so 2,000+ clients and
#: many short connections do not hit the kernel's defaults (somaxconn 4096 is the
#: kernel default since 5.4; older hosts had 128). SYN cookies off, as seed 002's
#: tuning had it: with a small listen backlog (vsftpd's is 32) a burst of connects fills
#: the SYN queue, the kernel answers with SYN cookies, and a cookie handshake whose
#: final ACK arrives while the accept queue is full is dropped with no state left to
#: retransmit from: the client is ESTABLISHED and waits for a greeting that never comes
#: (3 of 300 vsftpd logins hung 130 s here; with cookies off all 300 logged in, in
#: 5.3 s: docs/methodology.md, "Slow is a figure").
DEFAULT_SYSCTLS: dict[str, str] = {
    "net.ipv4.tcp_syncookies": "0",
    "net.core.somaxconn": "4096",
    "net.ipv4.tcp_fin_timeout": "15",
    "net.ipv4.tcp_tw_reuse": "1",
    "net.ipv4.ip_local_port_range": "32768 60999",
}
#: Container memory limit unless the variant says otherwise.
DEFAULT_MEMORY = "4g"
#: Where the FTP user's home is mounted in the container.
FTP_HOME = "/srv/ftp"
#: Capabilities a server needs beyond Docker's default set: pure-ftpd keeps
#: CAP_SYS_NICE and CAP_DAC_READ_SEARCH at startup (its caps.c) and exits with status
#: 252, silently, without them.
SERVER_CAPS: dict[str, list[str]] = {"pureftpd": ["SYS_NICE", "DAC_READ_SEARCH"]}
#: Network modes, the default first: ``netns`` (container on Docker's bridge, the load
#: generator joins its network namespace and connects over its loopback), ``bridge``
#: (the load generator connects from the host through the veth pair and the bridge),
#: ``host`` (the host's network namespace).
NETWORK_MODES = ("netns", "bridge", "host")


@dataclass(frozen=True)
class ContainerSettings:
    """What the backend, not the request, decides about a container.

    Attributes:
        network: one of :data:`NETWORK_MODES`, used when the variant has no ``network`` key.
        bind: with host networking, the address the server listens on and announces.
        labels: every label of the container and its volume (owner and extra labels).
        nofile: RLIMIT_NOFILE soft = hard asked for (``min(fs.nr_open, 1048576)``).
    """

    network: str = "netns"
    bind: str = "127.0.0.1"
    labels: dict[str, str] = field(default_factory=dict)
    nofile: int = 1048576


@dataclass
class ContainerSpec:
    """A container to run.

    Attributes:
        kwargs: keyword arguments of ``client.containers.run`` (image, name, detach,
            environment, labels, ulimits, mem_limit, memswap_limit, stop_signal, init,
            and as needed entrypoint, cap_add, cpuset_cpus, network_mode, sysctls, tmpfs,
            volumes).
        volume: the named volume to create (with ``labels``) before running, or None
            (tmpfs storage).
        labels: the labels of the container and the volume.
        env: the container's environment (the server container interface,
            docs/containers.md).
        network / bind / port / http_port: how the server is reached: ``bind`` and the
            ports are the container's own with ``bridge`` (address known only once it
            runs), the host's with ``host``.
        info: build_info entries known before the container runs (name, label, variant,
            requested_version, backend, image_id, image_tag, obtained, binary,
            interpreter, network, storage, memory_limit, cpu, cpuset, sysctls,
            rlimit_nofile, max_clients, pasv_ports, config_hash).
    """

    kwargs: dict[str, Any]
    volume: str | None
    labels: dict[str, str]
    env: dict[str, str]
    network: str
    bind: str
    port: int
    http_port: int | None
    info: dict[str, Any]


def http_env(req: ServerRequest, bind: str, http_port: int) -> dict[str, str]:
    """The HTTP part of the server container interface (docs/containers.md):
    ``HTTP_HOST``, ``HTTP_PORT``, and from the variant ``MAX_BODY`` (bytes; default 1 GiB,
    every server, tpd too), ``WORKERS`` (when given), ``KEEPALIVE`` (1/0).

    Raises:
        ServerSkipped: ``max_body`` is not a size.
    """
    var = req.variant
    env = {"HTTP_HOST": bind, "HTTP_PORT": str(http_port), "KEEPALIVE": "1" if var.get("keepalive", True) else "0"}
    try:
        env["MAX_BODY"] = str(variants.parse_size(var.get("max_body", DEFAULT_MAX_BODY)))
    except ValueError as e:
        raise ServerSkipped(f"{req.label}: invalid max_body: {e}") from None
    if "workers" in var:
        env["WORKERS"] = str(int(var["workers"]))
    return env


def container_spec(req: ServerRequest, settings: ContainerSettings, *, image_id: str, image_tag: str,
                   built: bool, name: str, password: str, pick_port: Callable[[], int],
                   cpu: list[int] | None = None, entrypoint: str | None = None) -> ContainerSpec:
    """Build the container for ``req`` (no engine call).

    Args:
        req: the server; its variant keys ``network``, ``storage``, ``tmpfs_size``,
            ``memory``, ``pasv_ports``, ``masquerade_address``, ``use_sendfile``,
            ``backlog``, ``idle_timeout``, ``sysctls`` and ``tls`` (the certificate folder
            mounted at :data:`TLS_DIR`, ``TLS_*`` variables; tpd's implicit listener on
            :data:`CONTAINER_FTPS_PORT`, which is then ``port``) apply.
        settings: the backend's side (:class:`ContainerSettings`).
        image_id / image_tag / built: the image (built now or cached, for ``obtained``).
        name: the container's name; its volume is ``<name>-home``.
        password: the FTP user's password (unused by an HTTP-only server).
        pick_port: returns a free port on ``settings.bind``; called only with host
            networking (FTP first, then HTTP for servers that speak it; an HTTP-only
            server's ``port`` is then 0 and its port ``http_port``).
        cpu: cores to pin to (``cpuset_cpus``), None for no pinning.
        entrypoint: a shell script run as the entrypoint instead of the image's (tpd).

    Raises:
        ServerSkipped: variant ``network`` or ``storage`` unknown, ``pasv_ports`` invalid.
    """
    var = dict(req.variant)
    network = str(var.get("network", settings.network))
    if network not in NETWORK_MODES:
        raise ServerSkipped(f"{req.label}: variant network={network!r}: want one of {', '.join(NETWORK_MODES)}")
    storage = str(var.get("storage", "disk"))
    if storage not in ("disk", "tmpfs"):
        raise ServerSkipped(f"{req.label}: variant storage={storage!r}: want 'disk' or 'tmpfs'")
    memory = str(var.get("memory", DEFAULT_MEMORY))
    if network == "host":
        port = pick_port()
        lo = 10000 + (port * 7919) % 20 * 1000  # a window away from the ephemeral range
        pasv = (lo, lo + 999)
        bind = settings.bind
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
    mode = tls_mode(req)
    if mode is not None:  # FTPS: the certificate folder mounted read-only (docs/containers.md)
        env.update({"TLS_MODE": mode, "TLS_CERT": f"{TLS_DIR}/{req.tls.cert.name}",
                    "TLS_KEY": f"{TLS_DIR}/{req.tls.key.name}", "TLS_CHAIN": f"{TLS_DIR}/{req.tls.chain.name}",
                    "TLS_KEY_TYPE": req.tls.key_type})
        if mode == "implicit" and req.name == "tpd":  # its implicit listener is a second one; the target
            port = pick_port() if network == "host" else CONTAINER_FTPS_PORT
            env["FTPS_PORT"] = str(port)
    http_port = None
    speaks = SERVER_PROTOCOLS.get(req.name, frozenset({"ftp"}))
    if "http" in speaks:
        http_port = pick_port() if network == "host" else CONTAINER_HTTP_PORT
        env.update(http_env(req, bind, http_port))
    if req.perf_map:  # a profiled cell of a JIT server: its perf map (runner.catalogue.servers.JIT_SERVERS)
        env["PERF_MAP"] = "1"
    if "ftp" not in speaks:  # HTTP only: no FTP listener, no login
        port = 0
        for k in ("FTP_PASSWORD", "FTP_PORT", "PASV_MIN", "PASV_MAX", "USE_SENDFILE", "IDLE_TIMEOUT"):
            env.pop(k, None)
        if req.name == "nginx":
            env["USE_SENDFILE"] = "1" if var.get("use_sendfile", True) else "0"
    nofile = settings.nofile
    sysctls = {**DEFAULT_SYSCTLS, **{k: str(v) for k, v in (var.get("sysctls") or {}).items()}}
    labels = dict(settings.labels)
    kwargs: dict[str, Any] = dict(
        image=image_id, name=name, detach=True, environment=env, labels=labels,
        ulimits=[docker.types.Ulimit(name="nofile", soft=nofile, hard=nofile)],
        mem_limit=memory, memswap_limit=memory, stop_signal="SIGTERM",
        # docker-init as PID 1: servers are not written to be PID 1 (vsftpd 3.0.3 as
        # PID 1 dies with SIGSEGV when a passive session is dropped); handle.pid is
        # the server itself, init's child, so memory figures do not include init.
        init=True)
    if entrypoint is not None:  # the image's own ENTRYPOINT is not xferlab's interface
        kwargs["entrypoint"] = ["/bin/sh", "-c", entrypoint, "xferlab-entrypoint"]
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
        kwargs["tmpfs"] = {FTP_HOME: f"size={var.get('tmpfs_size', '2g')},mode=0755"}
    else:
        volume = f"{name}-home"
        kwargs["volumes"] = {volume: {"bind": FTP_HOME, "mode": "rw"}}
    if mode is not None:
        kwargs.setdefault("volumes", {})[str(req.tls.cert.parent)] = {"bind": TLS_DIR, "mode": "ro"}
    cfg: dict[str, Any] = {k: v for k, v in env.items()
                           if k not in ("FTP_PASSWORD", "FTP_PORT", "HTTP_PORT", "HTTP_HOST")}
    cfg.update({"image": image_id, "network": network, "storage": storage, "memory": memory,
                "sysctls": sysctls, "nofile": nofile})
    info: dict[str, Any] = {
        "name": req.name, "label": req.label, "variant": dict(req.variant), "requested_version": req.version,
        "backend": "docker", "image_id": image_id, "image_tag": image_tag,
        "obtained": f"image {image_tag}" + (" (built now)" if built else " (cached)"),
        "binary": None, "interpreter": None, "network": network, "storage": storage,
        "memory_limit": memory, "cpu": list(cpu) if cpu else None, "cpuset": kwargs.get("cpuset_cpus"),
        "sysctls": sysctls, "rlimit_nofile": [nofile, nofile], "max_clients": req.max_clients,
        "pasv_ports": list(pasv), "config_hash": hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest(),
    }
    if mode is not None:
        info.update({"tls_mode": mode, "tls_key_type": req.tls.key_type})
    return ContainerSpec(kwargs, volume, labels, env, network, bind, port, http_port, info)
