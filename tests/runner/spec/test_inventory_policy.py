"""hosts.inventory: only static inventories under the allowed
directories reach ``ansible-inventory``; executable ones are never run, paths that
escape are refused, and the refusal says nothing about files outside."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from runner.multihost import MultiHostError
from runner.multihost.inventory import load_inventory
from runner.spec.model import SpecError, parse_spec

INI = "[servers]\nsrv1 ansible_host=192.0.2.10\n[clients]\ncli1 ansible_host=192.0.2.11\n"
HAVE_ANSIBLE = (Path(sys.executable).parent / "ansible-inventory").exists() or shutil.which("ansible-inventory")
needs_ansible = pytest.mark.skipif(not HAVE_ANSIBLE, reason="ansible-inventory not installed")


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    allowed = tmp_path / "allowed"
    outside = tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    monkeypatch.setenv("XFERLAB_INVENTORY_DIRS", str(allowed))
    return allowed, outside


def _script(path: Path, marker: Path) -> Path:
    """An executable inventory that leaves ``marker`` when Ansible runs it."""
    path.write_text(f"#!/bin/sh\ntouch {marker}\necho '{{\"servers\": {{\"hosts\": [\"s\"]}}, "
                    f"\"clients\": {{\"hosts\": [\"c\"]}}, \"_meta\": {{\"hostvars\": {{}}}}}}'\n")
    path.chmod(0o755)
    return path


@needs_ansible
def test_static_inventory_in_allowed_dir_loads(dirs):
    allowed, _ = dirs
    (allowed / "lab.ini").write_text(INI)
    inv = load_inventory(allowed / "lab.ini")
    assert inv.server.name == "srv1" and inv.server.address == "192.0.2.10"
    assert [c.name for c in inv.clients] == ["cli1"]


@needs_ansible
def test_executable_inventory_is_not_run(dirs, tmp_path):
    allowed, _ = dirs
    marker = tmp_path / "ran"
    inv = _script(allowed / "dyn.sh", marker)
    with pytest.raises(MultiHostError, match="is executable"):
        load_inventory(inv)
    assert not marker.exists(), "ansible-inventory ran the executable inventory"


@needs_ansible
def test_directory_with_an_executable_is_refused(dirs, tmp_path):
    allowed, _ = dirs
    marker = tmp_path / "ran"
    d = allowed / "lab"
    d.mkdir()
    (d / "hosts.ini").write_text(INI)
    _script(d / "more.sh", marker)
    with pytest.raises(MultiHostError, match="more.sh is executable"):
        load_inventory(d)
    assert not marker.exists()
    (d / "more.sh").unlink()
    assert load_inventory(d).server.name == "srv1"


@needs_ansible
def test_ansible_env_alone_keeps_scripts_from_running(tmp_path):
    """Second layer: even handed an executable inventory directly, ansible-inventory run
    with ansible_env() (static plugins only) does not execute it."""
    import subprocess

    from runner.multihost.inventory import _ansible_inventory
    from runner.spec.inventory_policy import ansible_env

    marker = tmp_path / "ran"
    inv = _script(tmp_path / "dyn.sh", marker)
    r = subprocess.run([_ansible_inventory(), "-i", str(inv), "--list"], capture_output=True, text=True,
                       timeout=120, env=ansible_env())
    assert not marker.exists() and r.returncode != 0
    subprocess.run([_ansible_inventory(), "-i", str(inv), "--list"], capture_output=True, text=True, timeout=120)
    assert marker.exists(), "control: with Ansible's default plugins the script does run"


def test_paths_escaping_the_dir_are_refused_alike(dirs):
    allowed, outside = dirs
    (outside / "real.ini").write_text(INI)
    (allowed / "link.ini").symlink_to(outside / "real.ini")
    msgs = {}
    for label, p in [("exists", outside / "real.ini"), ("missing", outside / "nope.ini"),
                     ("dotdot", allowed / ".." / "outside" / "real.ini"),
                     ("dotdot-missing", allowed / ".." / "outside" / "nope.ini"),
                     ("symlink", allowed / "link.ini"), ("etc", Path("/etc/passwd")),
                     ("etc-missing", Path("/etc/no-such-file-here"))]:
        with pytest.raises(MultiHostError) as ei:
            load_inventory(p)
        msgs[label] = str(ei.value).replace(repr(str(p)), "PATH")
        assert "not under an allowed inventory directory" in msgs[label]
    assert len(set(msgs.values())) == 1, msgs  # nothing tells an existing file from a missing one


def test_symlinked_directory_entry_leading_outside_is_refused(dirs):
    allowed, outside = dirs
    (outside / "x.ini").write_text(INI)
    d = allowed / "lab"
    d.mkdir()
    (d / "hosts.ini").write_text(INI)
    (d / "extra.ini").symlink_to(outside / "x.ini")
    with pytest.raises(MultiHostError, match="symlink leading outside"):
        load_inventory(d)


def test_spec_refuses_inventory_outside(dirs):
    allowed, outside = dirs
    (outside / "real.ini").write_text(INI)
    (allowed / "lab.ini").write_text(INI)
    base = {"servers": [{"name": "pyftpdlib"}], "workloads": [{"name": "login"}]}
    with pytest.raises(SpecError) as ei:
        parse_spec({**base, "hosts": {"inventory": str(outside / "real.ini")}})
    assert ei.value.errors[0][0] == "hosts.inventory"
    assert "No such file" not in str(ei.value)
    assert parse_spec({**base, "hosts": {"inventory": str(allowed / "lab.ini")}}).hosts is not None


def test_default_dirs(monkeypatch):
    from runner.config import REPO_ROOT
    from runner.spec.inventory_policy import inventory_dirs

    PROJECT_DIR = REPO_ROOT / "ansible" / "inventories"

    monkeypatch.delenv("XFERLAB_INVENTORY_DIRS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/tmp/xfl-cfg-test")
    got = inventory_dirs()
    assert got == [Path("/tmp/xfl-cfg-test/xferlab/inventories"), Path(os.path.realpath(PROJECT_DIR))]
    assert PROJECT_DIR.parts[-2:] == ("ansible", "inventories")
