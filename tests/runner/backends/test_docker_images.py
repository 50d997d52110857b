"""runner.images: the APT mirror is read from the host's sources (never hard-coded),
context hashes decide rebuilds, `xferlab images` CLI."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runner import images
from tests.docker_support import docker_client_or_skip, ensure_base


def test_apt_mirror_from_deb822_and_one_line(tmp_path: Path):
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "a.sources").write_text("Types: deb\nURIs: http://mirror.invalid/sec\nSuites: bookworm-security\n"
                                 "Components: main\n\nTypes: deb\nURIs: http://mirror.invalid/debian\n"
                                 "Suites: bookworm bookworm-updates\nComponents: main contrib\n")
    assert images.apt_mirror("bookworm", roots=[d]) == "http://mirror.invalid/debian"
    one = tmp_path / "sources.list"
    one.write_text("# comment\ndeb [arch=amd64] http://other.invalid/debian bookworm main\n")
    assert images.apt_mirror("bookworm", roots=[one]) == "http://other.invalid/debian"
    with pytest.raises(images.ImageError, match="no APT source"):
        images.apt_mirror("trixie", roots=[one])


def test_context_hash_changes_with_content(tmp_path: Path):
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    h1 = images.context_hash(tmp_path)
    assert h1 == images.context_hash(tmp_path)
    assert images.context_hash(tmp_path, {"buildargs": {"V": "1"}}) != h1
    (tmp_path / "extra").write_text("y")
    assert images.context_hash(tmp_path) != h1


def test_context_hash_follows_dockerignore(tmp_path: Path):
    """Files the engine would not send (.dockerignore) do not make a rebuild."""
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    (tmp_path / ".dockerignore").write_text("# test output\nartifacts\n")
    (tmp_path / "artifacts").mkdir()
    h1 = images.context_hash(tmp_path)
    (tmp_path / "artifacts" / "shot.png").write_bytes(b"png")
    assert images.context_hash(tmp_path) == h1
    (tmp_path / "app.py").write_text("x = 1\n")
    assert images.context_hash(tmp_path) != h1


def test_server_tags():
    assert images.server_tag("pyftpdlib", "2.2.0") == "xferlab/pyftpdlib:2.2.0"
    assert images.server_tag("vsftpd", None) == "xferlab/vsftpd:default"


@pytest.mark.docker
@pytest.mark.timeout(1800)  # may bootstrap the base and build vsftpd cold
def test_images_cli_build_reuses_and_lists():
    c = docker_client_or_skip()
    ensure_base(c)
    images.ensure_server_image("vsftpd", client=c, progress=print)
    p = subprocess.run([sys.executable, "-m", "runner.cli", "images", "build", "vsftpd"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr
    assert "xferlab/vsftpd:default" in p.stdout and "up to date" in p.stdout
    p = subprocess.run([sys.executable, "-m", "runner.cli", "images", "list"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0 and images.BASE_TAG in p.stdout and "xferlab/vsftpd:default" in p.stdout
    p = subprocess.run([sys.executable, "-m", "runner.cli", "images", "build", "nosuch"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "no image for server 'nosuch'" in p.stderr
