"""The standing services of ``compose/servers.yml`` as ``external`` servers of a spec
(``xferlab compose-targets``, docs/containers.md).

xferlab does not start or stop these containers: it finds the running ones of a Compose
project through the engine (labels ``com.docker.compose.project`` /
``com.docker.compose.service`` and ``xferlab=server``), reads each one's published
control port and its server's host PID, and turns them into spec entries
``{name: external, label: ..., external: {host, port, user, password, pid}}``.

Memory: the pid is the server process (the child of the container's docker-init, as the
docker backend's ``handle.pid``), so the process-tree sampler records
``server_mem_uss`` / ``server_mem_rss_minus_shared`` when the campaign runs in the host's
PID namespace. It is left out, with the reason, when it cannot be verified from here
(another PID namespace, a container without ``init``). The container's cgroup memory is
not recorded for external servers: a standing container's peak spans every earlier cell.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psutil

PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
#: The control port inside each container of compose/servers.yml.
CONTROL_PORT = "21/tcp"


class ComposeTargetError(Exception):
    """No usable compose service: none running, several projects and none chosen, a
    requested service missing or without a published control port. The message says which."""


@dataclass(frozen=True)
class ComposeService:
    """One running service of a compose project.

    Attributes:
        project, service: the Compose project and service names.
        container: the container's name.
        host, port: the published control port (``0.0.0.0`` published -> ``127.0.0.1``).
        pid: the server's host PID (docker-init's child), or None (then ``pid_note`` says why).
        pid_note: why there is no pid; None when there is one.
        cpuset: the container's ``cpuset`` (e.g. ``"0"``), ``""`` when unpinned.
        version: the server version the image records (``/opt/server-version``), or None.
    """

    project: str
    service: str
    container: str
    host: str
    port: int
    pid: int | None
    pid_note: str | None
    cpuset: str
    version: str | None

    def spec_entry(self, user: str, password: str) -> dict[str, Any]:
        """The spec's server entry: ``{name: external, label, external: {host, port,
        user, password[, pid]}}``; the label is ``SERVICE [VERSION] (compose)``."""
        ext: dict[str, Any] = {"host": self.host, "port": self.port, "user": user, "password": password}
        if self.pid is not None:
            ext["pid"] = self.pid
        label = " ".join(x for x in (self.service, self.version) if x) + " (compose)"
        return {"name": "external", "label": label, "external": ext}


def published_control(attrs: dict[str, Any]) -> tuple[str, int] | None:
    """(host, port) where the container's control port (21/tcp) is published, from
    ``attrs`` (the engine's inspect output); a wildcard address (``0.0.0.0``, ``::``, ``""``)
    becomes ``127.0.0.1``. None when it is not published."""
    bindings = ((attrs.get("NetworkSettings") or {}).get("Ports") or {}).get(CONTROL_PORT) or []
    for b in bindings:
        if b.get("HostPort"):
            host = b.get("HostIp") or ""
            if host in ("", "0.0.0.0", "::"):
                host = "127.0.0.1"
            return host, int(b["HostPort"])
    return None


def server_pid(attrs: dict[str, Any]) -> tuple[int | None, str | None]:
    """(pid, None) with the server's host PID: the oldest child of the container's init
    (``State.Pid``, which must be docker-init as seen from here; the entrypoint execs the
    server, so its first child is the server); (None, reason) otherwise."""
    init_pid = int((attrs.get("State") or {}).get("Pid") or 0)
    if not init_pid:
        return None, "the container has no process"
    if not (attrs.get("HostConfig") or {}).get("Init"):
        return None, "the container runs without init: true, so its server process is not known"
    try:
        init = psutil.Process(init_pid)
        name = init.name()
        kids = sorted((k.create_time(), k.pid) for k in init.children())
    except psutil.Error:
        name, kids = "", []
    if name != "docker-init" or not kids:
        return None, (f"host PID {init_pid} is not the container's docker-init here (run xferlab in the "
                      "host's PID namespace to sample the server's memory)")
    return kids[0][1], None


def _version(container) -> str | None:
    """The image's recorded server version (``/opt/server-version``), or None."""
    try:
        code, out = container.exec_run(["cat", "/opt/server-version"])
    except Exception:  # noqa: BLE001 - the version is a nicety of the label
        return None
    text = out.decode(errors="replace").strip() if code == 0 else ""
    return text if text and len(text) <= 64 and " " not in text else None


def compose_services(client, project: str | None = None, services: list[str] | None = None
                     ) -> list[ComposeService]:
    """The running server services of a compose project, in service-name order.

    Args:
        client: a docker.DockerClient.
        project: the Compose project (``-p``); None: the only one running servers.
        services: service names to keep (all when None), e.g. ``["vsftpd", "tpd"]``.

    Raises:
        ComposeTargetError: no running server service, several projects and none given,
            a requested service not running, or one without a published control port.
    """
    filters = {"label": ["xferlab=server", PROJECT_LABEL] if project is None
               else ["xferlab=server", f"{PROJECT_LABEL}={project}"], "status": "running"}
    found = client.containers.list(filters=filters)
    projects = sorted({c.labels.get(PROJECT_LABEL, "") for c in found})
    if not found:
        where = f"compose project {project!r}" if project else "any compose project"
        raise ComposeTargetError(f"no running server service in {where} (start them: FTP_PASSWORD=... "
                                 "docker-compose -f compose/servers.yml up -d)")
    if project is None and len(projects) > 1:
        raise ComposeTargetError(f"servers of several compose projects are running ({', '.join(projects)}); "
                                 "choose one with --project")
    by_service = {c.labels.get(SERVICE_LABEL, c.name): c for c in found}
    if services:
        missing = [s for s in services if s not in by_service]
        if missing:
            raise ComposeTargetError(f"service(s) not running in project {projects[0]!r}: {', '.join(missing)} "
                                     f"(running: {', '.join(sorted(by_service))})")
        by_service = {s: by_service[s] for s in services}
    out = []
    for name in sorted(by_service):
        c = by_service[name]
        attrs = c.attrs
        addr = published_control(attrs)
        if addr is None:
            raise ComposeTargetError(f"service {name!r} ({c.name}) publishes no control port ({CONTROL_PORT})")
        pid, note = server_pid(attrs)
        out.append(ComposeService(project=c.labels.get(PROJECT_LABEL, ""), service=name, container=c.name,
                                  host=addr[0], port=addr[1], pid=pid, pid_note=note,
                                  cpuset=(attrs.get("HostConfig") or {}).get("CpusetCpus") or "",
                                  version=_version(c)))
    return out
