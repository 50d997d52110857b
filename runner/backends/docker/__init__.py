"""Docker backend: each server under test in its own container, one container per cell.

``start`` builds or reuses the image for the server and version (:mod:`runner.backends.docker.images`:
``xferlab/<server>:<version or default>``, rebuilt when its build context changes),
runs a container from it, waits until the server answers the 220 greeting and accepts
the login, and returns a :class:`DockerServerHandle`. ``stop`` removes the container and
its storage volume.

Every container gets the same treatment (the point of containers here; built by the
pure function :func:`~.spec.container_spec`, tested without an engine):

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

Networking (variant ``network`` or the backend's ``network``): ``netns`` (default)
puts the container on Docker's bridge (its own namespace: per-container sysctls, its
own TCP counters) and gives the target ``netns=/proc/<pid>/ns/net``: the load
generator joins that namespace (:mod:`runner.net.netns`) and reaches the server
over the namespace's loopback, no veth/bridge/netfilter on the path; ``bridge``
connects from the host straight to the container's address on the bridge (no port
publishing, no userland proxy; passive mode works as the server announces its own
address); ``host`` shares the host's network namespace (the server binds the backend's
``bind`` address, 127.0.0.1 by default, on a free port; no per-container sysctls).
docs/containers.md compares them.

Memory: ``handle.pid`` is the server as a host PID (the child of the container's
docker-init, whose host PID is ``State.Pid``),
so :class:`runner.metrics.sampler.TreeSampler` follows the server's process tree as it
does for the local backend; :meth:`DockerServerHandle.cgroup_memory` reads the
container's memory cgroup (:mod:`runner.metrics.cgroup`), falling back to the engine's
stats API when the cgroup files are not visible.

Containers carry owner labels; :func:`reap_orphans` (run whenever a backend is made)
removes those whose owner process is gone, :func:`cleanup` those with a given label
(:mod:`.reaping`).
"""
from __future__ import annotations

try:
    import docker  # noqa: F401
    import docker.errors  # noqa: F401
except ImportError as _e:  # get_backend("docker") -> ImportError -> resolve_backend falls back to local
    raise ImportError("the docker backend needs the Docker SDK for Python (pip install 'docker>=7')") from _e

from runner.backends.docker.backend import DockerBackend
from runner.backends.docker.container import (
    CONTAINER_FTP_PORT,
    DEFAULT_MEMORY,
    DEFAULT_SYSCTLS,
    FTP_USER,
    PASV_RANGE,
    SERVER_CAPS,
    ContainerSettings,
    ContainerSpec,
    container_spec,
)
from runner.backends.docker.handle import DockerServerHandle
from runner.backends.docker.reaping import LABEL, cleanup, owner_labels, reap_orphans
from runner.metrics.cgroup import cgroup_dir, read_cgroup_memory

__all__ = ["CONTAINER_FTP_PORT", "DEFAULT_MEMORY", "DEFAULT_SYSCTLS", "FTP_USER", "LABEL",
           "PASV_RANGE", "SERVER_CAPS", "ContainerSettings", "ContainerSpec", "DockerBackend",
           "DockerServerHandle", "cgroup_dir", "cleanup", "container_spec", "owner_labels",
           "read_cgroup_memory", "reap_orphans"]
