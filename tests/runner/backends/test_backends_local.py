"""Local backend against real servers: start, log in, STOR/RETR, build_info, stop."""
from __future__ import annotations

import ftplib
import io
import resource
from pathlib import Path

import psutil
import pytest

from runner.backends import BACKENDS, get_backend, local, paths
from runner.backends.base import ServerFailed, ServerSkipped
from runner.backends.local import LocalBackend, available_servers
from runner.spec.request import ServerRequest
from tests.runner.support import assert_gone, start_or_skip
from tests.support.skips import machine_lacks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def ftp_roundtrip(target, payload: bytes = b"xferlab-test " * 5000) -> None:
    """Log in with ftplib, STOR then RETR ``payload``, check it came back unchanged and
    landed in target.root."""
    ftp = ftplib.FTP()
    ftp.connect(target.host, target.port, timeout=15)
    try:
        ftp.login(target.user, target.password)
        ftp.storbinary("STOR roundtrip.bin", io.BytesIO(payload))
        got = io.BytesIO()
        ftp.retrbinary("RETR roundtrip.bin", got.write)
        assert got.getvalue() == payload
        assert ftp.size("roundtrip.bin") == len(payload)
        ftp.quit()
    finally:
        ftp.close()
    if target.root is not None:
        assert (target.root / "roundtrip.bin").read_bytes() == payload


def tree_pids(pid: int) -> list[int]:
    """pid and its descendants now."""
    p = psutil.Process(pid)
    return [pid, *(c.pid for c in p.children(recursive=True))]


INFO_KEYS = {"name", "version", "variant", "binary", "interpreter", "config_hash", "obtained"}


def _run_server(backend, req, **kw):
    h = start_or_skip(backend, req, **kw)
    try:
        assert h.alive()
        ftp_roundtrip(h.target)
        info = h.build_info
        assert INFO_KEYS <= set(info), info
        assert info["name"] == req.name
        assert len(info["config_hash"]) == 64
        assert info["greeting"].startswith("220")
        pids = tree_pids(h.pid)
    finally:
        h.stop()
    h.stop()  # idempotent
    assert not h.alive()
    assert_gone(pids)
    assert not h.run_dir.exists()
    return info


@pytest.mark.parametrize("version", ["2.2.0", "1.5.10"])
def test_pyftpdlib_versions(backend, version):
    info = _run_server(backend, ServerRequest("pyftpdlib", version))
    assert info["version"] == version
    assert info["interpreter"].endswith("bin/python")
    assert f"pyftpdlib-{version}" in info["interpreter"]
    assert info["binary"].endswith("servers/pyftpdlib/serve.py")
    assert info["use_sendfile"] is True


def test_pyftpdlib_variant_changes_config_hash(backend):
    a = _run_server(backend, ServerRequest("pyftpdlib", "2.2.0"))
    b = _run_server(backend, ServerRequest("pyftpdlib", "2.2.0", variant={"use_sendfile": False}))
    c = _run_server(backend, ServerRequest("pyftpdlib", "2.2.0"))
    assert b["use_sendfile"] is False and "--no-sendfile" in b["argv"]
    assert a["config_hash"] == c["config_hash"]  # per-run port/dirs/password normalised
    assert a["config_hash"] != b["config_hash"]
    assert "***" in a["argv"]  # password not recorded


def test_twisted(backend):
    info = _run_server(backend, ServerRequest("twisted", "24.11.0"))
    assert info["version"] == "24.11.0"


@pytest.mark.parametrize("name", ["vsftpd", "proftpd", "pureftpd"])
def test_debian_servers(backend, name):
    info = _run_server(backend, ServerRequest(name))
    assert info["version"]
    assert info["obtained"].startswith(("system", "debian-extract"))


def test_forking_server_tree_stopped(backend):
    """proftpd forks one process per client: stop() must take the children too."""
    req = ServerRequest("proftpd")
    h = start_or_skip(backend, req)
    clients = []
    try:
        for _ in range(3):
            f = ftplib.FTP()
            f.connect(h.target.host, h.target.port, timeout=10)
            f.login(h.target.user, h.target.password)
            clients.append(f)
        pids = tree_pids(h.pid)
        assert len(pids) >= 4, pids
    finally:
        h.stop()
        for f in clients:
            f.close()
    assert_gone(pids)


def test_pinning_and_rlimit(backend):
    h = backend.start(ServerRequest("pyftpdlib", "2.2.0"), cpu=[0])
    try:
        p = psutil.Process(h.pid)
        assert p.cpu_affinity() == [0]
        soft, hard = p.rlimit(psutil.RLIMIT_NOFILE)
        assert soft == hard >= resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        assert h.build_info["rlimit_nofile"] == [soft, hard]
        assert h.build_info["cpu"] == [0]
    finally:
        h.stop()


def test_bad_version_is_reported(backend):
    with pytest.raises((ServerSkipped, ServerFailed)) as ei:
        backend.check(ServerRequest("pyftpdlib", "0.0.0-nonexistent"))
    msg = str(ei.value)
    assert "pyftpdlib" in msg and "0.0.0" in msg and "failed" in msg


def test_invalid_version_string_refused(backend):
    with pytest.raises(ServerSkipped, match="invalid version"):
        backend.check(ServerRequest("pyftpdlib", "1.0; rm -rf /"))


def test_unknown_server(backend):
    with pytest.raises(ServerSkipped, match="unknown server"):
        backend.check(ServerRequest("nosuchftpd"))


def test_startup_failure_has_log_tail(backend, tmp_path, monkeypatch):
    """A server that dies at startup -> ServerFailed carrying its log output."""
    (tmp_path / "pyftpdlib").mkdir()
    (tmp_path / "pyftpdlib" / "serve.py").write_text(
        "import sys\nsys.stderr.write('boom: cannot start\\n')\nsys.exit(3)\n")
    monkeypatch.setattr(paths, "SERVERS_DIR", tmp_path)
    with pytest.raises(ServerFailed) as ei:
        backend.start(ServerRequest("pyftpdlib", "2.2.0"))
    assert "boom: cannot start" in str(ei.value)
    assert "exit code 3" in str(ei.value)


def test_external(backend):
    h = backend.start(ServerRequest("pyftpdlib", "2.2.0"))
    try:
        t = h.target
        ext = ServerRequest("external", external={"host": t.host, "port": t.port, "user": t.user,
                                                  "password": t.password, "pid": h.pid})
        backend.check(ext)
        eh = backend.start(ext)
        assert eh.pid == h.pid and eh.alive()
        assert eh.target.port == t.port
        assert eh.build_info["obtained"] == "external"
        eh.stop()  # no-op
        assert h.alive()
        nopid = backend.start(ServerRequest("external", external={
            "host": t.host, "port": t.port, "user": t.user, "password": t.password}))
        assert nopid.pid is None and nopid.alive()
    finally:
        h.stop()
    with pytest.raises(ServerSkipped, match="no FTP login"):
        backend.check(ext)
    with pytest.raises(ServerSkipped, match="host and port"):
        backend.check(ServerRequest("external"))


def test_tpd_recipe(backend):
    req = ServerRequest("tpd")
    if not (paths.SERVERS_DIR / "tpd" / "Makefile").is_file():
        with pytest.raises(ServerSkipped, match="Makefile"):
            backend.check(req)
        return
    try:
        backend.check(req)
    except ServerSkipped as e:
        assert "tpd" in str(e)
        pytest.skip(str(e))
    h = backend.start(req)
    try:
        assert h.target.http_port and h.target.http_port != h.target.port
        ftp_roundtrip(h.target)
        import socket
        socket.create_connection((h.target.host, h.target.http_port), timeout=5).close()
        assert h.build_info["version"].startswith("src-")
        pids = tree_pids(h.pid)
    finally:
        h.stop()
    assert_gone(pids)


def test_available_servers():
    rows = available_servers()
    names = [n for n, _ in rows]
    assert {"pyftpdlib", "twisted", "vsftpd", "proftpd", "pureftpd", "tpd"} <= set(names)
    for name, reason in rows:
        assert reason is None or (isinstance(reason, str) and name in reason)
    assert dict(rows)["pyftpdlib"] is None


def test_get_backend():
    assert isinstance(get_backend("local"), LocalBackend)
    assert get_backend("local").name == "local"
    assert "local" in BACKENDS
    with pytest.raises(ValueError, match="local"):
        get_backend("docker-nope")


@pytest.mark.parametrize("name", ["pyftpdlib", "vsftpd"])
def test_storage_tmpfs_puts_the_home_on_a_tmpfs(backend, name):
    """storage: tmpfs: the FTP home is on a tmpfs (a forking server that switches user,
    vsftpd, still reaches it); the default is on disk. Both recorded in build_info."""
    if local.filesystem_type(Path("/dev/shm")) != "tmpfs":
        machine_lacks("a tmpfs on /dev/shm")
    req = ServerRequest(name, "2.2.0" if name == "pyftpdlib" else None, variant={"storage": "tmpfs"})
    h = start_or_skip(backend, req)
    try:
        assert local.filesystem_type(h.target.root) == "tmpfs"
        ftp_roundtrip(h.target)
        assert h.build_info["storage"] == "tmpfs" and h.build_info["storage_fs"] == "tmpfs"
    finally:
        h.stop()
    assert not h.run_dir.exists()
    info = _run_server(backend, ServerRequest(name, "2.2.0" if name == "pyftpdlib" else None))
    assert info["storage"] == "disk" and info["storage_fs"] not in ("tmpfs", "ramfs", "")


def test_storage_disk_on_a_tmpfs_is_a_skip(backend, monkeypatch):
    """XFERLAB_RUN_DIR on a tmpfs cannot give storage=disk: skipped with the reason."""
    from runner.config import get_settings

    monkeypatch.setenv("XFERLAB_RUN_DIR", "/dev/shm")
    get_settings.cache_clear()
    try:
        with pytest.raises(ServerSkipped, match="storage=disk: /dev/shm is on tmpfs; set XFERLAB_RUN_DIR"):
            backend.start(ServerRequest("pyftpdlib", "2.2.0"))
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()


def test_docker_only_variant_is_a_skip_under_local(backend):
    with pytest.raises(ServerSkipped, match="'memory' needs the docker backend"):
        backend.check(ServerRequest("pyftpdlib", "2.2.0", variant={"memory": "512m"}))


def test_twisted_passive_range_and_masquerade(backend):
    """servers/twisted/serve.py (local and container): PASV replies announce the
    masquerade address and a port inside pasv_ports."""
    h = backend.start(ServerRequest("twisted", variant={"pasv_ports": "41000-41009",
                                                        "masquerade_address": "192.0.2.7"}))
    try:
        ftp = ftplib.FTP()
        ftp.connect(h.target.host, h.target.port, timeout=15)
        try:
            ftp.login(h.target.user, h.target.password)
            reply = ftp.sendcmd("PASV")
            nums = [int(x) for x in reply[reply.index("(") + 1:reply.index(")")].split(",")]
            assert nums[:4] == [192, 0, 2, 7], reply
            assert 41000 <= nums[4] * 256 + nums[5] <= 41009, reply
        finally:
            ftp.close()
    finally:
        h.stop()


def test_bind_address_is_passed_in():
    """LocalBackend(host=...) binds the server there (no module global to patch): the
    target is that address, and the port is not open on 127.0.0.1."""
    import socket

    b = LocalBackend(host="127.0.0.2")
    h = b.start(ServerRequest("pyftpdlib", "2.2.0"))
    try:
        assert h.target.host == "127.0.0.2"
        assert "127.0.0.2" in h.build_info["argv"]
        ftp_roundtrip(h.target)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", h.target.port), timeout=5).close()
    finally:
        h.stop()
    assert LocalBackend().host == "127.0.0.1"


def test_exit_reason_and_cgroup_memory(backend):
    """A killed local server says how it ended; a local server has no cgroup of its own."""
    import os
    import signal

    h = backend.start(ServerRequest("pyftpdlib", "2.2.0"))
    try:
        assert h.exit_reason() is None and h.cgroup_memory() is None
        os.kill(h.pid, signal.SIGKILL)
        h._proc.wait(10)
        assert not h.alive()
        assert h.exit_reason() == "killed by SIGKILL"
    finally:
        h.stop()
    assert h.exit_reason() == "killed by SIGKILL"


def test_servers_fetch_extracts_the_debian_server(tmp_path):
    """``xferlab servers --fetch vsftpd`` downloads and extracts Debian's vsftpd into the
    cache: the extracted binary runs and reports the upstream version of the package
    version recorded in info.json; an unknown name is refused with the valid ones."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "XFERLAB_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-m", "runner.cli", "servers", "--fetch", "vsftpd"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    binary = tmp_path / "cache" / "debs" / "vsftpd" / "root" / "usr" / "sbin" / "vsftpd"
    assert "extracted to" in run.stdout and os.access(binary, os.X_OK), run.stdout
    recorded = json.loads((binary.parents[3] / "info.json").read_text())["packages"]["vsftpd"]
    # vsftpd -v writes its version to file descriptor 0
    v = subprocess.run(f"{binary} -v 0>&1", shell=True, capture_output=True, text=True, timeout=30)
    upstream = recorded.split(":")[-1].split("-")[0]
    assert f"vsftpd: version {upstream}" in v.stdout, (v.stdout, v.stderr, recorded)
    bad = subprocess.run([sys.executable, "-m", "runner.cli", "servers", "--fetch", "nginx"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "not a Debian-packaged server" in bad.stdout + bad.stderr
    assert "vsftpd" in bad.stdout + bad.stderr


def test_local_server_runs_in_a_cgroup_of_its_own(backend):
    """vsftpd under the local backend: the server joined the cgroup v2 the lab made before
    it forked anything, so its session processes are born in it; three logins and QUITs
    add to the cgroup's usage (each session costs the server CPU: at least 100 us, at most
    0.5 s); stop() removes the cgroup."""
    from runner.metrics.cgroup_cpu import v2_root

    if v2_root() is None:
        machine_lacks("a cgroup v2 hierarchy under the cgroup root (a v1-only host)")
    h = start_or_skip(backend, ServerRequest("vsftpd"))
    try:
        where = h.build_info["cpu_cgroup"]
        assert not where.startswith("none"), where
        cg = Path(where)
        before = h.cgroup_cpu()
        assert before is not None
        clients = []
        for _ in range(3):
            f = ftplib.FTP()
            f.connect(h.target.host, h.target.port, timeout=10)
            f.login(h.target.user, h.target.password)
            clients.append(f)
        members = set((cg / "cgroup.procs").read_text().split())
        assert {str(p) for p in tree_pids(h.pid)} <= members and len(members) >= 4, members
        for f in clients:
            f.quit()
        after = h.cgroup_cpu()
        assert after is not None
        assert 3 * 100 <= after.since(before).usage_usec <= 3 * 500_000
    finally:
        h.stop()
    assert not cg.exists()
    assert h.cgroup_cpu() is None


def test_local_server_without_cgroup_v2_falls_back(backend, tmp_path, monkeypatch):
    """No cgroup hierarchy the lab can use under XFERLAB_CGROUP_ROOT (here a v1 layout
    without cpuacct): the server starts all the same, without a cgroup, and its build info
    says why."""
    from runner.config import get_settings

    (tmp_path / "cpu").mkdir()
    monkeypatch.setenv("XFERLAB_CGROUP_ROOT", str(tmp_path))
    get_settings.cache_clear()
    try:
        h = start_or_skip(backend, ServerRequest("vsftpd"))
        try:
            why = h.build_info["cpu_cgroup"]
            assert why.startswith("none: no cgroup can be made for the server here"), why
            assert f"no cgroup v2 hierarchy under {tmp_path}" in why, why
            assert f"no cgroup v1 cpuacct hierarchy under {tmp_path}" in why, why
            assert h.cgroup_cpu() is None
        finally:
            h.stop()
    finally:
        monkeypatch.delenv("XFERLAB_CGROUP_ROOT")
        get_settings.cache_clear()
