"""The container spec as a pure function (no Docker engine): what each request and the
backend's settings turn into for ``containers.run``, checked also through the SDK's own
translation into the engine's create request (HostConfig)."""
from __future__ import annotations

import docker  # noqa: F401 - a dependency of xferlab (pyproject.toml)
import pytest
from docker.models.containers import _create_container_args  # noqa: E402

from runner.backends.base import ServerSkipped  # noqa: E402
from runner.backends.docker.container import DEFAULT_SYSCTLS, PASV_RANGE, ContainerSettings, container_spec  # noqa: E402
from runner.spec.request import ServerRequest

SETTINGS = ContainerSettings(network="bridge", bind="127.0.0.3",
                             labels={"xferlab": "server", "xferlab.server": "x", "xferlab.test": "t"},
                             nofile=65536)


def _no_port() -> int:
    raise AssertionError("a bridge container needs no host port")


def spec(req: ServerRequest, settings: ContainerSettings = SETTINGS, **kw):
    args = dict(image_id="sha256:abc", image_tag="xferlab/x:default", built=False, name="xferlab-x-1",
                password="pw", pick_port=_no_port)
    args.update(kw)
    return container_spec(req, settings, **args)


def engine_request(kwargs: dict) -> dict:
    """The create-container request the SDK would send for these run() kwargs."""
    kw = {k: v for k, v in kwargs.items() if k not in ("detach",)}
    return _create_container_args({**kw, "version": "1.41"})


def test_bridge_disk_defaults():
    s = spec(ServerRequest("vsftpd"))
    k = s.kwargs
    assert (k["image"], k["name"], k["detach"], k["init"], k["stop_signal"]) == \
        ("sha256:abc", "xferlab-x-1", True, True, "SIGTERM")
    assert k["environment"] == {"FTP_USER": "xferlab", "FTP_PASSWORD": "pw", "FTP_HOST": "0.0.0.0",
                                "FTP_PORT": "21", "PASV_MIN": "30000", "PASV_MAX": "31999",
                                "MAX_CLIENTS": "2000", "USE_SENDFILE": "1", "BACKLOG": "1024",
                                "IDLE_TIMEOUT": "300"}
    assert k["mem_limit"] == k["memswap_limit"] == "4g"
    assert k["sysctls"] == DEFAULT_SYSCTLS and "network_mode" not in k
    assert k["volumes"] == {"xferlab-x-1-home": {"bind": "/srv/ftp", "mode": "rw"}}
    assert s.volume == "xferlab-x-1-home" and "tmpfs" not in k
    assert k["labels"] == s.labels == SETTINGS.labels
    assert "cpuset_cpus" not in k and "cap_add" not in k and "entrypoint" not in k
    assert (s.network, s.bind, s.port, s.http_port) == ("bridge", "0.0.0.0", 21, None)
    hc = engine_request(k)["host_config"]
    assert hc["Memory"] == hc["MemorySwap"] == 4 * 2**30
    assert hc["Ulimits"] == [{"Name": "nofile", "Soft": 65536, "Hard": 65536}]
    assert hc["Sysctls"] == DEFAULT_SYSCTLS and hc["Init"] is True
    assert hc["Binds"] == ["xferlab-x-1-home:/srv/ftp:rw"]
    i = s.info
    assert i["pasv_ports"] == list(PASV_RANGE) and i["rlimit_nofile"] == [65536, 65536]
    assert (i["backend"], i["network"], i["storage"], i["memory_limit"]) == ("docker", "bridge", "disk", "4g")
    assert i["obtained"] == "image xferlab/x:default (cached)" and i["cpuset"] is None


def test_host_network_takes_ports_and_no_sysctls():
    ports = iter([40001, 40002])
    s = spec(ServerRequest("tpd", variant={"network": "host"}), pick_port=ports.__next__)
    k = s.kwargs
    assert k["network_mode"] == "host" and "sysctls" not in k and s.info["sysctls"] == {}
    assert (s.bind, s.port, s.http_port) == ("127.0.0.3", 40001, 40002)
    env = k["environment"]
    assert (env["FTP_HOST"], env["FTP_PORT"], env["HTTP_PORT"]) == ("127.0.0.3", "40001", "40002")
    lo = 10000 + (40001 * 7919) % 20 * 1000
    assert (env["PASV_MIN"], env["PASV_MAX"]) == (str(lo), str(lo + 999))
    assert engine_request(k)["host_config"]["NetworkMode"] == "host"


def test_variant_keys_reach_the_container():
    s = spec(ServerRequest("pureftpd", variant={
        "storage": "tmpfs", "tmpfs_size": "1g", "memory": "512m", "sysctls": {"net.core.somaxconn": 8192},
        "pasv_ports": "31000-31009", "masquerade_address": "203.0.113.7", "use_sendfile": False,
        "backlog": 64}), cpu=[0, 1], built=True)
    k = s.kwargs
    assert s.volume is None and "volumes" not in k and k["tmpfs"] == {"/srv/ftp": "size=1g,mode=0755"}
    assert k["sysctls"]["net.core.somaxconn"] == "8192" and k["sysctls"]["net.ipv4.tcp_tw_reuse"] == "1"
    assert k["cap_add"] == ["SYS_NICE", "DAC_READ_SEARCH"] and k["cpuset_cpus"] == "0,1"
    env = k["environment"]
    assert (env["PASV_MIN"], env["PASV_MAX"], env["PASV_ADDRESS"]) == ("31000", "31009", "203.0.113.7")
    assert (env["USE_SENDFILE"], env["BACKLOG"]) == ("0", "64")
    hc = engine_request(k)["host_config"]
    assert hc["Memory"] == 512 * 2**20 and hc["CpusetCpus"] == "0,1" and "/srv/ftp" in hc["Tmpfs"]
    assert s.info["obtained"].endswith("(built now)") and s.info["cpu"] == [0, 1]


def test_entrypoint_script_replaces_the_images():
    s = spec(ServerRequest("tpd"), entrypoint="echo hi")
    assert s.kwargs["entrypoint"] == ["/bin/sh", "-c", "echo hi", "xferlab-entrypoint"]
    assert s.http_port == 8080 and s.kwargs["environment"]["HTTP_PORT"] == "8080"


def test_config_hash_ignores_per_run_values_only():
    a = spec(ServerRequest("vsftpd"), password="one", name="xferlab-a")
    b = spec(ServerRequest("vsftpd"), password="two", name="xferlab-b")
    assert a.info["config_hash"] == b.info["config_hash"]
    assert spec(ServerRequest("vsftpd", variant={"memory": "1g"})).info["config_hash"] != a.info["config_hash"]
    assert spec(ServerRequest("vsftpd"), image_id="sha256:def").info["config_hash"] != a.info["config_hash"]


@pytest.mark.parametrize("variant, match", [({"network": "overlay"}, "network='overlay'"),
                                            ({"storage": "floppy"}, "storage='floppy'"),
                                            ({"pasv_ports": "9-1"}, "invalid pasv_ports")])
def test_bad_variant_values_are_skips(variant, match):
    with pytest.raises(ServerSkipped, match=match):
        spec(ServerRequest("vsftpd", variant=variant))


def test_mount_fs_type_reads_the_longest_matching_mount(tmp_path, monkeypatch):
    from runner.backends.docker import handle as handle_mod

    info = ("22 1 0:21 / / rw,relatime - overlay overlay rw\n"
            "30 22 0:30 / /srv rw - ext4 /dev/sda1 rw\n"
            "31 30 0:31 / /srv/ftp rw,nosuid - tmpfs tmpfs rw,size=2g\n"
            "32 22 0:32 / /srv/ftp\\040old rw - xfs /dev/sdb rw\n")
    real = handle_mod.Path

    def fake_path(p):
        return tmp_path / "mountinfo" if str(p) == "/proc/4242/mountinfo" else real(p)

    (tmp_path / "mountinfo").write_text(info)
    monkeypatch.setattr(handle_mod, "Path", fake_path)
    assert handle_mod.mount_fs_type(4242, "/srv/ftp") == "tmpfs"
    assert handle_mod.mount_fs_type(4242, "/srv/ftp/sub/dir") == "tmpfs"
    assert handle_mod.mount_fs_type(4242, "/srv/other") == "ext4"
    assert handle_mod.mount_fs_type(4242, "/srv/ftp old") == "xfs"
    assert handle_mod.mount_fs_type(4242, "/etc") == "overlay"
    assert handle_mod.mount_fs_type(999_999_999, "/srv/ftp") == ""


def test_netns_is_the_default_and_runs_the_container_as_bridge_does():
    """netns changes who joins whose namespace, not the container: same run() kwargs
    as bridge (own namespace, sysctls, no port publishing), recorded as netns."""
    assert ContainerSettings().network == "netns"
    bridge = spec(ServerRequest("tpd"))
    netns = spec(ServerRequest("tpd", variant={"network": "netns"}))
    assert netns.kwargs == bridge.kwargs and "network_mode" not in netns.kwargs
    assert netns.kwargs["sysctls"] == DEFAULT_SYSCTLS and "ports" not in netns.kwargs
    assert (netns.network, netns.info["network"], bridge.info["network"]) == ("netns", "netns", "bridge")
    assert netns.info["config_hash"] != bridge.info["config_hash"]  # a different setup, a different hash
    with pytest.raises(ServerSkipped, match="want one of netns, bridge, host"):
        spec(ServerRequest("tpd", variant={"network": "overlay"}))
