"""Fixture files: written whole or not at all, never a leftover temporary file, and a
clear error instead of filling the disk."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runner.load.ftp.fixtures import write_fixture
from tests.support import REPO_ROOT

MIB = 1 << 20

# Runs write_fixture (the real function) in a child whose RLIMIT_FSIZE is small, so the
# write fails part way with EFBIG (SIGXFSZ ignored, as the kernel then returns EFBIG).
_CHILD = textwrap.dedent("""
    import json, os, resource, signal, sys
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit, path, size = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    from runner.load.ftp.fixtures import write_fixture
    try:
        write_fixture(path, size)
        print(json.dumps({"ok": True}))
    except OSError as e:
        print(json.dumps({"ok": False, "type": type(e).__name__, "errno": e.errno, "msg": str(e)}))
""")


def _child(tmp_path: Path, limit: int, size: int) -> dict:
    p = subprocess.run([sys.executable, "-c", _CHILD, str(limit), str(tmp_path / "f.bin"), str(size)],
                       capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_failed_write_removes_its_temporary_file(tmp_path):
    out = _child(tmp_path, limit=3 * MIB, size=8 * MIB)
    assert out["ok"] is False and out["errno"] == 27, out  # EFBIG, part way through
    assert sorted(os.listdir(tmp_path)) == [], "a failed fixture write left a file behind"


def test_failed_rewrite_keeps_the_old_file(tmp_path):
    write_fixture(tmp_path / "f.bin", MIB)
    out = _child(tmp_path, limit=3 * MIB, size=8 * MIB)
    assert out["ok"] is False
    assert os.listdir(tmp_path) == ["f.bin"] and (tmp_path / "f.bin").stat().st_size == MIB


def test_too_little_free_space_is_refused_before_writing(tmp_path):
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    size = free + (1 << 30)
    # The child's RLIMIT_FSIZE (16 MiB) keeps a write that was not refused from filling the disk.
    out = _child(tmp_path, limit=16 * MIB, size=size)
    assert out["ok"] is False and out["type"] == "FixtureSpaceError", out
    assert str(tmp_path / "f.bin") in out["msg"] and str(size) in out["msg"] and "free" in out["msg"]
    assert os.listdir(tmp_path) == []


def test_check_free_space_names_path_need_and_free(tmp_path):
    from runner.load.ftp.fixtures import FixtureSpaceError, check_free_space

    with pytest.raises(FixtureSpaceError) as ei:
        check_free_space(tmp_path / "x.bin", 1 << 62)
    assert ei.value.errno == 28
    msg = str(ei.value)
    assert str(tmp_path / "x.bin") in msg and str(1 << 62) in msg and "are free there" in msg
    check_free_space(tmp_path / "x.bin", MIB)  # small: fine


def test_write_fixture_exact_size_and_reuse(tmp_path):
    p = write_fixture(tmp_path / "f.bin", 3 * MIB + 5)
    assert p.stat().st_size == 3 * MIB + 5
    ino = p.stat().st_ino
    write_fixture(p, 3 * MIB + 5)
    assert p.stat().st_ino == ino  # reused, not rewritten
    write_fixture(p, 7)
    assert p.stat().st_size == 7 and os.listdir(tmp_path) == ["f.bin"]


def test_place_phase_fixture_uploads_what_the_phase_downloads(remote_target, pyftpd):
    """Each workload's download file (retr: transfer_size, retr_concurrent: file_size) is
    uploaded by STOR to a real pyftpdlib server with no local home: byte for byte the
    client-side source; an upload workload places nothing."""
    from runner.catalogue.workloads import WorkloadParams
    from runner.load.ftp.fixtures import client_source, place_phase_fixture, server_name

    home = pyftpd[2]
    params = WorkloadParams(transfer_size=3 * MIB + 5, file_size=2 * MIB + 7)
    for f in (server_name(3 * MIB + 5), server_name(2 * MIB + 7)):
        (home / f).unlink(missing_ok=True)
    before = sorted(p.name for p in home.iterdir())
    place_phase_fixture("stor", remote_target, params)
    assert sorted(p.name for p in home.iterdir()) == before
    place_phase_fixture("retr", remote_target, params)
    placed = home / server_name(3 * MIB + 5)
    assert placed.read_bytes() == Path(client_source(3 * MIB + 5)).read_bytes()
    place_phase_fixture("retr_concurrent", remote_target, params)
    assert (home / server_name(2 * MIB + 7)).stat().st_size == 2 * MIB + 7
    mtime = placed.stat().st_mtime_ns
    place_phase_fixture("retr", remote_target, params)  # in place already: SIZE only, no upload
    assert placed.stat().st_mtime_ns == mtime
