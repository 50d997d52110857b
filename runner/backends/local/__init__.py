"""Local backend: FTP and HTTP servers as child processes on this machine (127.0.0.1 unless
``LocalBackend(host=...)`` says otherwise).

Each :meth:`LocalBackend.start` creates a fresh run dir (:mod:`.rundir`:
``tempfile.mkdtemp`` under ``XFERLAB_RUN_DIR``, default the system temporary folder, or
with the variant ``storage: tmpfs`` under ``XFERLAB_TMPFS_DIR``, default ``/dev/shm``;
the filesystem type found is recorded as ``build_info["storage_fs"]``)::

    <run>/home/     the FTP user's home / HTTP document root (Target.root): fixtures go
                    here; HTTP servers store uploads in home/uploads/
    <run>/logs/     server.log (stdout+stderr) and the server's own log files
    <run>/<config>  the rendered config (vsftpd.conf, proftpd.conf, config.json, ...)

The server runs (:mod:`.process`) in its own session/process group
(``start_new_session``) with RLIMIT_NOFILE raised (soft = hard; as root the hard limit
is raised to ``min(fs.nr_open, 1048576)`` where the kernel allows it; the limit in force
is in ``build_info["rlimit_nofile"]`` as [soft, hard]), optionally pinned to CPUs
(``sched_setaffinity`` in the child before exec, so forked per-client processes inherit
it), and configured for ``ServerRequest.max_clients`` connections (seed 000: 2000).
``start`` returns once the server answers the 220 greeting *and* accepts the USER/PASS
login (an HTTP-only server, whose Target.port is 0: any HTTP reply on Target.http_port),
else raises ServerFailed with the tail of the server's logs.

Servers (one module each under :mod:`.recipes`): pyftpdlib, twisted (per-version venvs,
see :mod:`runner.backends.local.venvs`), vsftpd, proftpd, pureftpd (Debian binaries, installed
or extracted by :mod:`runner.backends.local.debs`; accounts in :mod:`.accounts`), tpd (built
from ``servers/tpd``; FTP and HTTP); the HTTP-only go-http (built from
``servers/go-http``), nginx, node-http (installed Debian packages) and uvicorn (a venv
per version), :mod:`.recipes.http` and :mod:`.recipes.uvicorn`; ``external``
(:mod:`runner.backends.external`).

``build_info["config_hash"]`` is the sha256 of the rendered config with the per-run
values (port, run dir, password) replaced by fixed placeholders, so two runs of the same
server/version/variant have the same hash.
"""
from __future__ import annotations

from runner.backends.external import ExternalHandle
from runner.backends.local.accounts import VSFTPD_GECOS, VSFTPD_PASSWORD, VSFTPD_USER
from runner.backends.local.backend import LocalBackend, available_servers
from runner.backends.local.debs import fetch_debian_server
from runner.backends.local.process import LocalServerHandle
from runner.backends.local.recipes import FTP_USER, Launch, Recipe
from runner.backends.local.rundir import RunDir, filesystem_type
from runner.backends.system import free_port

__all__ = ["FTP_USER", "VSFTPD_GECOS", "VSFTPD_PASSWORD", "VSFTPD_USER", "ExternalHandle",
           "Launch", "LocalBackend", "LocalServerHandle", "Recipe", "RunDir", "available_servers",
           "fetch_debian_server", "filesystem_type", "free_port"]
