"""Venv cache, its creation lock, and the Debian binary lookup."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from filelock import FileLock

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


def test_file_lock_excludes_other_processes(tmp_path):
    lock = tmp_path / "x.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys,time\nfrom runner.backends.local.venvs import FileLock\n"
         f"with FileLock(__import__('pathlib').Path({str(lock)!r})):\n"
         "    print('held', flush=True); time.sleep(3)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t = time.monotonic()
        with pytest.raises(TimeoutError, match="could not lock"):
            with FileLock(lock, timeout=0.5):
                pass
        assert time.monotonic() - t < 3
        with FileLock(lock, timeout=10):  # obtained once the holder exits
            pass
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_debian_lookup_and_ldd():
    assert debs.missing_libs(__import__("pathlib").Path("/bin/true")) == []
    for name in debs.DEB_SERVERS:
        fb = debs.find_server_binary(name)
        if fb is not None:
            assert fb.path.is_file()
            assert fb.obtained in ("system", "debian-extract")
    with pytest.raises(KeyError):
        debs.find_server_binary("nosuchftpd")
