"""Docker backend against real containers: all six server images, passive transfers,
limits/sysctls/storage, the cgroup and process-tree memory, failures with reasons.

Skipped (with the reason) only when no Docker engine answers. Images are built once
(the base by debootstrap when missing) and reused across runs."""
from __future__ import annotations

import ftplib
import io
from pathlib import Path

import psutil
import pytest

from runner.backends.base import ServerFailed, ServerSkipped
from runner.spec.request import ServerRequest
from tests.docker_support import SESSION_LABEL
from tests.support import REPO_ROOT

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(2700)]  # cold image builds

SERVERS = ("pyftpdlib", "twisted", "vsftpd", "proftpd", "pureftpd", "tpd")


def _ftp(t) -> ftplib.FTP:
    f = ftplib.FTP(timeout=10)
    f.connect(t.host, t.port)
    f.login(t.user, t.password)
    return f


@pytest.mark.parametrize("name", SERVERS)
def test_server_container_serves_passive_transfers(dbackend, client, name):
    h = dbackend.start(ServerRequest(name), cpu=[0])
    cid = h.container_id
    try:
        assert h.alive()
        info = h.build_info
        img = client.images.get(info["image_tag"])
        assert info["image_id"] == img.id and info["backend"] == "docker"
        assert info["version"] and info["greeting"].startswith("220")
        # handle.pid is the container's main process as a host PID: the tree sampler works
        p = psutil.Process(h.pid)
        assert p.is_running() and p.name() != "docker-init"  # the server, not the container's init
        assert p.parent().name() == "docker-init"
        data = bytes(range(256)) * 4096  # 1 MiB
        f = _ftp(h.target)
        f.storbinary("STOR probe.bin", io.BytesIO(data))
        buf = io.BytesIO()
        f.retrbinary("RETR probe.bin", buf.write)
        f.quit()
        assert buf.getvalue() == data
        mem = h.cgroup_memory()
        assert set(mem) >= {"current", "peak", "anon"}, mem
        assert 0 < mem["anon"] <= mem["current"] <= mem["peak"]
        attrs = client.api.inspect_container(cid)
        assert attrs["HostConfig"]["CpusetCpus"] == "0"
        assert attrs["Config"]["Labels"]["xferlab.test"] == SESSION_LABEL
    finally:
        h.stop()
    h.stop()  # idempotent
    assert not h.alive()
    assert not client.containers.list(all=True, filters={"id": cid})


def test_limits_sysctls_tmpfs_storage(dbackend, client):
    h = dbackend.start(ServerRequest("pyftpdlib", variant={"storage": "tmpfs", "memory": "512m",
                                                             "sysctls": {"net.core.somaxconn": "8192"}}))
    try:
        c = client.containers.get(h.container_id)
        hc = c.attrs["HostConfig"]
        assert hc["Memory"] == 512 * 2**20
        assert hc["Sysctls"]["net.core.somaxconn"] == "8192"
        assert hc["Sysctls"]["net.ipv4.tcp_tw_reuse"] == "1"
        assert "/srv/ftp" in hc["Tmpfs"]
        code, out = c.exec_run(["sh", "-c", "cat /proc/sys/net/core/somaxconn; ulimit -n; "
                                            "grep ' /srv/ftp ' /proc/mounts"])
        lines = out.decode().split("\n")
        assert code == 0 and lines[0] == "8192"
        assert int(lines[1]) == h.build_info["rlimit_nofile"][0] >= 4096
        assert "tmpfs" in lines[2]
        assert h.build_info["storage"] == "tmpfs" and h.build_info["memory_limit"] == "512m"
        assert h.build_info["storage_fs"] == "tmpfs"   # read from the server's own mountinfo
    finally:
        h.stop()


@pytest.mark.parametrize("name", SERVERS)
def test_masquerade_address_in_pasv_reply(dbackend, name):
    h = dbackend.start(ServerRequest(name, variant={"masquerade_address": "203.0.113.7"}))
    try:
        f = _ftp(h.target)
        resp = f.sendcmd("PASV")
        f.close()
        assert resp.startswith("227") and "203,0,113,7" in resp, resp
        port = [int(x) for x in resp.split("(")[1].split(")")[0].split(",")][-2:]
        assert 30000 <= port[0] * 256 + port[1] <= 31999, resp
    finally:
        h.stop()


def test_host_network_variant(dbackend):
    h = dbackend.start(ServerRequest("vsftpd", variant={"network": "host"}))
    try:
        assert h.target.host == "127.0.0.1" and h.build_info["network"] == "host"
        f = _ftp(h.target)
        f.storbinary("STOR a", io.BytesIO(b"x" * 1000))
        assert f.size("a") == 1000
        f.quit()
    finally:
        h.stop()


def test_start_failure_names_the_reason_and_leaves_nothing(dbackend, client):
    with pytest.raises(ServerFailed) as ei:
        dbackend.start(ServerRequest("pyftpdlib", variant={"sysctls": {"net.nonexistent.knob": "1"}}))
    assert "pyftpdlib" in str(ei.value) and "docker could not start" in str(ei.value)
    assert not client.containers.list(all=True, filters={"label": f"xferlab.test={SESSION_LABEL}"})


def test_container_killed_is_reported_dead(dbackend, client):
    h = dbackend.start(ServerRequest("proftpd"))
    try:
        client.containers.get(h.container_id).kill()
        assert not h.alive()
        assert "exit" in (h.exit_reason() or "")
    finally:
        h.stop()


def test_unknown_variant_values_are_skips(dbackend):
    with pytest.raises(ServerSkipped, match="storage"):
        dbackend.start(ServerRequest("vsftpd", variant={"storage": "floppy"}))
    with pytest.raises(ServerSkipped, match="one version per image"):
        dbackend.check(ServerRequest("vsftpd", version="2.3.5"))


def test_auto_backend_is_docker_when_engine_answers(client):
    from runner.campaign.loop import resolve_backend

    assert resolve_backend("auto").name == "docker"


def test_containers_of_a_killed_runner_are_reaped(client, dbackend):
    """A runner killed with SIGKILL cannot stop its server container; the next
    DockerBackend on this host removes it and its volume, and leaves live owners' alone."""
    import os
    import signal
    import subprocess
    import sys

    from runner.backends.docker import DockerBackend

    code = ("import time; from runner.backends.docker import DockerBackend; "
            "from runner.backends.base import ServerRequest; "
            f"DockerBackend(labels={{'xferlab.test': {SESSION_LABEL!r}}}).start(ServerRequest('pyftpdlib')); "
            "print('up', flush=True); time.sleep(120)")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         cwd=REPO_ROOT)
    try:
        assert p.stdout.readline().strip() == "up"
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
    mine = dbackend.start(ServerRequest("pyftpdlib"))  # a live owner's container: kept
    try:
        flt = {"label": f"xferlab.owner_pid={p.pid}"}
        assert [c.status for c in client.containers.list(all=True, filters=flt)] == ["running"]
        msgs: list[str] = []
        DockerBackend(client=client, progress=msgs.append)
        assert msgs == ["removed 1 server container(s) left by a killed xferlab process"]
        assert not client.containers.list(all=True, filters=flt) and not client.volumes.list(filters=flt)
        assert mine.alive()
    finally:
        mine.stop()


def test_serve_runs_the_server_in_a_container(client):
    """`xferlab serve --backend docker` (the server side of a multi-host campaign):
    a container with host networking listening on --bind, the fixture uploaded into
    it, memory and CPU sampled from its process tree, container gone after `stop`."""
    import ftplib
    import json
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-m", "runner.cli", "serve", "--server", '{"name": "pyftpdlib"}',
                          "--bind", "127.0.0.1", "--backend", "docker", "--max-seconds", "300"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         cwd=REPO_ROOT,
                         env={**__import__("os").environ, "XFERLAB_DOCKER_LABELS": f"xferlab.test={SESSION_LABEL}"})

    def ask(cmd: str | None) -> dict:
        if cmd is not None:
            p.stdin.write(cmd + "\n")
            p.stdin.flush()
        return json.loads(p.stdout.readline())

    try:
        ready = ask(None)
        assert ready["event"] == "ready", ready
        t, info = ready["target"], ready["build_info"]
        assert t["host"] == "127.0.0.1" and info["backend"] == "docker" and info["network"] == "host"
        assert ready["environment"]["backend"] == "docker"
        fx = ask(f"fixture {1 << 20}")
        got = io.BytesIO()
        f = ftplib.FTP()
        f.connect(t["host"], t["port"], timeout=15)
        f.login(t["user"], t["password"])
        f.retrbinary(f"RETR {fx['name']}", got.write)
        f.quit()
        assert len(got.getvalue()) == 1 << 20
        assert ask("checkpoint loaded")["uss"] > 0
        cpu = ask("cpu")  # the tree's CPU so far: a Python server started and served a STOR and a RETR
        assert cpu["user"] >= 0 and cpu["system"] >= 0 and cpu["user"] + cpu["system"] > 0, cpu
        stopped = ask("stop")
        assert stopped["event"] == "stopped" and stopped["alive"] is True and stopped["peak_uss"] > 0
        assert p.wait(60) == 0
    finally:
        if p.poll() is None:
            p.kill()
    assert not client.containers.list(all=True, filters={"label": f"xferlab.owner_pid={p.pid}"})


def test_serve_refuses_a_bridge_container_across_hosts(client):
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "runner.cli", "serve", "--bind", "127.0.0.1", "--backend", "docker",
                        "--server", '{"name": "pyftpdlib", "variant": {"network": "bridge"}}'],
                       capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    said = json.loads(r.stdout.splitlines()[0])
    assert r.returncode == 0 and said["event"] == "skipped", r.stdout + r.stderr
    assert "host networking" in said["reason"] and "network='bridge'" in said["reason"]


def _active_opens(pid: int) -> int:
    """Tcp ActiveOpens (connect() calls that got a SYN out) of pid's network namespace."""
    from runner.metrics.tcpstats import parse_proc_net

    f = Path(f"/proc/{pid}/net/snmp")
    return parse_proc_net(f.read_text(), str(f))["Tcp"]["ActiveOpens"]


@pytest.mark.parametrize("network", ["netns", "bridge"])
def test_netns_client_connects_from_inside_the_container_namespace(dbackend, network):
    """Default netns: the target carries the server's namespace and the load
    generator's connections are opened *in it* (its ActiveOpens count them); bridge:
    they are opened on the host (the container's namespace opens none)."""
    import os

    from runner.catalogue.workloads import WorkloadParams
    from runner.load.ftp.workloads import run_workload_sync

    assert dbackend.network == "netns"  # root here: the default is not downgraded
    h = dbackend.start(ServerRequest("pyftpdlib", variant={"network": network}))
    try:
        assert h.build_info["network"] == network
        if network == "netns":
            assert h.target.netns == f"/proc/{h.pid}/ns/net"
            assert os.readlink(h.target.netns) != os.readlink("/proc/self/ns/net")
        else:
            assert h.target.netns is None
        before = _active_opens(h.pid)
        r = run_workload_sync("login", h.target, WorkloadParams(clients=20, login_mode="concurrent"))
        assert r.error_count == 0 and r.ops == 20
        r = run_workload_sync("retr", h.target, WorkloadParams(transfer_size=2 << 20, duration=0.2))
        assert r.error_count == 0 and r.bytes >= 2 << 20
        opened = _active_opens(h.pid) - before
        assert opened >= 20 if network == "netns" else opened == 0, opened
    finally:
        h.stop()


def test_missing_image_is_named_and_never_pulled(dbackend, client, monkeypatch):
    """An image removed after it was built: start() names it and the build command, and the
    engine is not asked to pull (no registry here; a pull would hang or name the registry)."""
    gone = "sha256:" + "0" * 64
    monkeypatch.setattr(dbackend, "image", lambda req: ("xferlab/pyftpdlib:removed", gone, False))
    pulls: list = []
    monkeypatch.setattr(client.images, "pull", lambda *a, **k: pulls.append(a))
    with pytest.raises(ServerFailed) as ei:
        dbackend.start(ServerRequest("pyftpdlib"))
    msg = str(ei.value)
    assert "xferlab/pyftpdlib:removed" in msg and "not in the docker engine" in msg
    assert "xferlab images build pyftpdlib" in msg
    assert not pulls
    assert not client.containers.list(all=True, filters={"label": f"xferlab.test={SESSION_LABEL}"})
    assert not client.volumes.list(filters={"label": f"xferlab.test={SESSION_LABEL}"})
