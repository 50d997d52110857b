"""Owner labels on server containers, and removing containers whose owner is gone
(orphans) or that a caller names by label (cleanup)."""
from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

import docker
import docker.errors
import psutil

#: Label on every container/volume the docker backend makes (cleanup filters on it).
LABEL = "xferlab"


def owner_labels() -> dict[str, str]:
    """Labels naming the xferlab process that starts a container: host name, PID and
    the process's start time (so a reused PID is not taken for the owner)."""
    return {"xferlab.owner_host": socket.gethostname(), "xferlab.owner_pid": str(os.getpid()),
            "xferlab.owner_started": f"{psutil.Process().create_time():.2f}"}


def owner_gone(labels: dict[str, str], host: str) -> bool:
    """True when ``labels`` name an owner process on ``host`` that no longer exists or
    was started at another time than ``xferlab.owner_started`` (its PID reused). False
    for another host's containers, unlabelled ones, and owners that cannot be inspected."""
    if labels.get("xferlab.owner_host") != host or not labels.get("xferlab.owner_pid", "").isdigit():
        return False
    try:
        started = psutil.Process(int(labels["xferlab.owner_pid"])).create_time()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False
    return f"{started:.2f}" != labels.get("xferlab.owner_started")


def reap_orphans(client) -> int:
    """Remove the server containers (and their volumes) that an xferlab process on
    this host started and can no longer stop because it is gone (killed with SIGKILL,
    the machine's OOM killer...): see :func:`owner_gone`. Containers of live owners and
    of other hosts are left alone. Returns how many containers were removed.
    Called whenever a DockerBackend is made, so the next campaign cleans up."""
    host = socket.gethostname()
    return _remove(client, {"label": [f"{LABEL}=server", "xferlab.owner_host"]},
                   lambda labels: owner_gone(labels, host))


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
