"""Venv cache, its creation lock, and the Debian binary lookup."""
from __future__ import annotations

import subprocess

import pytest

from runner.backends.local import debs
from runner.backends.local.venvs import cache_dir, ensure_venv, read_marker


def test_cached_venv_reused():
    v = ensure_venv("pyftpdlib", "2.2.0")  # built by the first test run, then cached
    again = ensure_venv("pyftpdlib", "2.2.0")
    assert again.created is False and again.version == "2.2.0"
    assert again.path == cache_dir() / "venvs" / "pyftpdlib-2.2.0"
    assert read_marker(v.path)["version"] == "2.2.0"
    out = subprocess.run([str(v.python), "-c", "import pyftpdlib; print(pyftpdlib.__ver__)"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "2.2.0"


def test_debian_lookup_and_ldd():
    assert debs.missing_libs(__import__("pathlib").Path("/bin/true")) == []
    for name in debs.DEB_SERVERS:
        fb = debs.find_server_binary(name)
        if fb is not None:
            assert fb.path.is_file()
            assert fb.obtained in ("system", "debian-extract")
    with pytest.raises(KeyError):
        debs.find_server_binary("nosuchftpd")
