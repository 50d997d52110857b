"""runner.backends.docker.images: the APT mirror is read from the host's sources (never hard-coded),
context hashes decide rebuilds, `xferlab images` CLI."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runner.backends.docker import images
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


@pytest.mark.parametrize(("jobs", "shown"), [("0", "0"), ("9", "9"), ("two", "'two'")])
def test_images_build_jobs_out_of_range_is_a_usage_error(jobs, shown):
    p = subprocess.run([sys.executable, "-m", "runner.cli", "images", "build", "vsftpd", "--jobs", jobs],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and f"--jobs wants a whole number from 1 to 8, got {shown}" in p.stderr, p.stderr


def _args_without_default(dockerfile: Path) -> set[str]:
    """ARG names a Dockerfile declares after FROM without a default (the caller must give them)."""
    names = set()
    seen_from = False
    for line in dockerfile.read_text().splitlines():
        word = line.split(" ", 1)
        if word[0] == "FROM":
            seen_from = True
        elif word[0] == "ARG" and seen_from and "=" not in word[1]:
            names.add(word[1].strip())
    return names


def test_one_dockerfile_per_family():
    """pyftpdlib/twisted share servers/Dockerfile.python, proftpd/pure-ftpd
    servers/Dockerfile.debian; each is given every argument its Dockerfile needs."""
    si = images.SERVER_IMAGES
    assert si["pyftpdlib"].outside_dockerfile() == si["twisted"].outside_dockerfile() == \
        (images.SERVERS_DIR / "Dockerfile.python").resolve()
    assert si["proftpd"].outside_dockerfile() == si["pureftpd"].outside_dockerfile() == \
        (images.SERVERS_DIR / "Dockerfile.debian").resolve()
    assert si["vsftpd"].outside_dockerfile() is None and si["tpd"].outside_dockerfile() is None
    for name in ("pyftpdlib", "twisted", "proftpd", "pureftpd"):
        assert not (images.SERVERS_DIR / name / "Dockerfile").exists(), name
        spec = si[name]
        assert spec.buildargs["SERVER"] == name
        assert _args_without_default(spec.outside_dockerfile()) == set(spec.build_args(None)) - {"VERSION"}
    assert si["twisted"].build_args("24.11.0") == {"SERVER": "twisted", "PACKAGE": "twisted", "VERSION": "24.11.0"}
    assert si["proftpd"].build_args(None) == {"SERVER": "proftpd", "PACKAGE": "proftpd-core",
                                              "EXTRA": "proftpd-mod-crypto"}  # mod_tls: FTPS


def test_compose_builds_as_runner_images_does():
    """compose/servers.yml builds each server from the same context, Dockerfile and
    build arguments as runner.backends.docker.images (so both paths make the same image)."""
    import yaml

    services = {}
    for f in ("servers.yml", "http-servers.yml"):  # FTP servers (and tpd), HTTP-only servers
        services.update(yaml.safe_load((images.COMPOSE_DIR / f).read_text())["services"])
    assert set(services) == set(images.SERVER_IMAGES)
    for name, spec in images.SERVER_IMAGES.items():
        build = services[name]["build"]
        context = (images.COMPOSE_DIR / build["context"]).resolve()
        assert context == spec.context.resolve(), name
        assert (context / build.get("dockerfile", "Dockerfile")).resolve() == (spec.context / spec.dockerfile).resolve()
        assert build.get("args", {}) == spec.buildargs, name


def test_family_dockerfile_counts_in_the_context_hash(tmp_path: Path):
    """A change to a family Dockerfile (outside each server's context) rebuilds its images."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "serve.py").write_text("print(1)\n")
    family = tmp_path / "Dockerfile.fam"
    family.write_text("FROM x\nARG SERVER\n")
    spec = images.ServerImage("a", tmp_path / "a", "../Dockerfile.fam", {"SERVER": "a"}, version_arg="VERSION")
    h1 = images.server_context_hash(spec, None, "sha256:base")
    assert h1 == images.server_context_hash(spec, None, "sha256:base")
    assert images.server_context_hash(spec, "1.0", "sha256:base") != h1
    assert images.server_context_hash(spec, None, "sha256:other") != h1
    family.write_text("FROM x\nARG SERVER\nRUN true\n")
    assert images.server_context_hash(spec, None, "sha256:base") != h1
    inside = images.ServerImage("a", tmp_path / "a")
    assert inside.outside_dockerfile() is None


class _StubImages:
    """The ``images`` collection of a docker client: ``get`` of the tags built so far."""

    def __init__(self, base_id: str):
        self.tags = {images.BASE_TAG: type("Img", (), {"id": base_id, "labels": {}})()}

    def get(self, tag: str):
        import docker

        if tag not in self.tags:
            raise docker.errors.ImageNotFound(tag)
        return self.tags[tag]


def test_two_builders_of_one_image_build_it_once(monkeypatch):
    """Two threads (as two test workers or two campaigns would) want the tpd image at once:
    the build lock (images.build_lock, a file lock) lets one build while the other waits,
    then finds the image built with its context hash."""
    import threading
    import time

    from runner.backends.docker.images import build

    client = type("Client", (), {"images": _StubImages("sha256:base")})()
    built: list[str] = []

    def fake_build(c, *, tag, labels, **_):
        built.append(tag)
        time.sleep(0.3)  # a build takes time: the other thread arrives meanwhile
        c.images.tags[tag] = type("Img", (), {"id": "sha256:" + tag, "labels": labels})()
        return "sha256:" + tag

    monkeypatch.setattr(build, "build_image", fake_build)
    got: list[tuple] = []
    threads = [threading.Thread(target=lambda: got.append(images.ensure_server_image("tpd", client=client)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert built == [images.server_tag("tpd", None)], built
    assert sorted(g[2] for g in got) == [False, True] and len({g[1] for g in got}) == 1, got
