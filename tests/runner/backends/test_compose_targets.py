"""``xferlab compose-targets`` without an engine: published ports, server PIDs, cpusets and
the spec made of compose services (the engine path: tests/integration/test_compose_servers.py)."""
from __future__ import annotations

import os

import pytest

from runner.backends.docker.compose import ComposeService, published_control, server_pid
from runner.cli import main
from runner.cli.compose import cpuset_cpus, targets_spec
from runner.spec.model import parse_spec


def _svc(service: str, port: int, pid: int | None, cpuset: str = "0", version: str | None = "1.0") -> ComposeService:
    return ComposeService(project="lab", service=service, container=f"lab-{service}-1", host="127.0.0.1",
                          port=port, pid=pid, pid_note=None if pid else "no pid", cpuset=cpuset, version=version)


def test_published_control_port():
    attrs = {"NetworkSettings": {"Ports": {"21/tcp": [{"HostIp": "127.0.0.1", "HostPort": "2103"}],
                                           "30200/tcp": [{"HostIp": "127.0.0.1", "HostPort": "30200"}]}}}
    assert published_control(attrs) == ("127.0.0.1", 2103)
    attrs["NetworkSettings"]["Ports"]["21/tcp"] = [{"HostIp": "0.0.0.0", "HostPort": "2101"}]
    assert published_control(attrs) == ("127.0.0.1", 2101)
    attrs["NetworkSettings"]["Ports"]["21/tcp"] = None  # exposed, not published
    assert published_control(attrs) is None
    assert published_control({}) is None


def test_server_pid_refuses_what_it_cannot_verify():
    assert server_pid({"State": {"Pid": 0}, "HostConfig": {"Init": True}}) == (None, "the container has no process")
    pid, note = server_pid({"State": {"Pid": os.getpid()}, "HostConfig": {"Init": False}})
    assert pid is None and "init: true" in note
    pid, note = server_pid({"State": {"Pid": os.getpid()}, "HostConfig": {"Init": True}})
    assert pid is None and f"host PID {os.getpid()} is not the container's docker-init" in note


def test_cpuset_cpus():
    assert cpuset_cpus("") == set()
    assert cpuset_cpus("0") == {0}
    assert cpuset_cpus("0-2,5") == {0, 1, 2, 5}
    with pytest.raises(ValueError, match="not a cpuset: 'x'"):
        cpuset_cpus("x")


def test_targets_spec_is_a_valid_spec():
    spec = targets_spec([_svc("tpd", 2106, 4242, version=None), _svc("vsftpd", 2103, None)], "xferlab", "pw", 2)
    assert spec["servers"] == [
        {"name": "external", "label": "tpd (compose)",
         "external": {"host": "127.0.0.1", "port": 2106, "user": "xferlab", "password": "pw", "pid": 4242}},
        {"name": "external", "label": "vsftpd 1.0 (compose)",
         "external": {"host": "127.0.0.1", "port": 2103, "user": "xferlab", "password": "pw"}}]
    assert spec["pinning"] == {"client": [1]}  # away from the services' cpuset 0
    parsed = parse_spec(spec, "test")
    assert [s.display() for s in parsed.servers] == ["tpd (compose)", "vsftpd 1.0 (compose)"]
    assert "pinning" not in targets_spec([_svc("tpd", 2106, 1, cpuset="0-1")], "u", "p", 2)  # no CPU left
    assert "pinning" not in targets_spec([_svc("tpd", 2106, 1, cpuset="")], "u", "p", 2)  # unpinned
    with pytest.raises(ValueError, match="no service"):
        targets_spec([], "u", "p", 2)


def test_compose_targets_needs_the_password(monkeypatch, capsys):
    monkeypatch.delenv("XFL_TEST_NO_SUCH_PW", raising=False)
    assert main(["compose-targets", "--password-env", "XFL_TEST_NO_SUCH_PW"]) == 2
    assert "set XFL_TEST_NO_SUCH_PW to the FTP password the compose services were started with" in \
        capsys.readouterr().err
