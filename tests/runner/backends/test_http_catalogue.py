"""The HTTP servers in the catalogue, the variant keys and the container spec (no engine,
no server): protocols, workers/keepalive/max_body validation, the HTTP part of the
container interface (every HTTP container gets the upload bound, through its entrypoint),
stored-file listing."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runner.backends.base import check_subdir, list_stored_files
from runner.backends.paths import SERVERS_DIR
from runner.catalogue.servers import DEFAULT_MAX_BODY, FTP_SERVERS, HTTP_SERVERS, SERVER_NAMES, SERVER_PROTOCOLS, speaks
from runner.catalogue.variants import check_variant, options_for, parse_size
from runner.load.target import Target
from runner.spec.request import ServerRequest
from tests.runner.backends.http_checks import max_body_of


def test_protocols_and_names():
    assert HTTP_SERVERS == {"tpd", "go-http", "nginx", "node-http", "uvicorn", "netty"}
    assert FTP_SERVERS == {"pyftpdlib", "twisted", "vsftpd", "proftpd", "pureftpd", "tpd"}
    assert speaks("tpd", "ftp") and speaks("tpd", "http") and not speaks("nginx", "ftp")
    assert set(SERVER_PROTOCOLS) == set(SERVER_NAMES)
    assert not Target("h", 0, "u", "").speaks_ftp and Target("h", 21, "u", "p").speaks_ftp


def test_http_variant_keys():
    assert check_variant("node-http", {"workers": 4, "keepalive": False, "max_body": "64m", "storage": "tmpfs"}) == []
    assert check_variant("go-http", {"workers": 2, "max_body": 8192}) == []
    assert check_variant("tpd", {"max_body": "1k"}) == []
    probs = dict(check_variant("nginx", {"workers": 0, "max_body": "lots", "pasv_ports": "30000-30010"}))
    assert "from 1 to 64" in probs["workers"] and "size" in probs["max_body"]
    assert "does not honour" in probs["pasv_ports"]
    assert "does not honour" in dict(check_variant("vsftpd", {"workers": 2}))["workers"]
    assert "does not honour" in dict(check_variant("tpd", {"keepalive": False}))["keepalive"]
    assert "workers" in options_for("uvicorn") and "pasv_ports" not in options_for("uvicorn")
    assert parse_size("64m") == 64 << 20 and parse_size(8192) == 8192 and parse_size("2K") == 2048
    for bad in (0, True, "1x", "", -5, "2t"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_container_spec_of_an_http_server():
    from runner.backends.docker.container import ContainerSettings, container_spec

    def pick() -> int:
        raise AssertionError("bridge: no host port")

    s = container_spec(ServerRequest("node-http", variant={"workers": 4, "max_body": "1m", "keepalive": False}),
                       ContainerSettings(network="netns"), image_id="sha256:x", image_tag="xferlab/node-http:default",
                       built=False, name="xferlab-node-http-1", password="pw", pick_port=pick)
    env = s.kwargs["environment"]
    assert s.port == 0 and s.http_port == 8080
    assert "FTP_PASSWORD" not in env and "PASV_MIN" not in env
    assert (env["HTTP_HOST"], env["HTTP_PORT"], env["WORKERS"], env["MAX_BODY"], env["KEEPALIVE"]) == \
        ("0.0.0.0", "8080", "4", str(1 << 20), "0")
    ports = iter([40001, 40002])
    h = container_spec(ServerRequest("go-http"), ContainerSettings(network="host"), image_id="sha256:x",
                       image_tag="t", built=False, name="n", password="pw", pick_port=lambda: next(ports))
    assert h.port == 0 and h.http_port == 40002 and h.kwargs["environment"]["HTTP_HOST"] == "127.0.0.1"
    assert h.kwargs["environment"]["MAX_BODY"] == str(1 << 30)
    t = container_spec(ServerRequest("tpd"), ContainerSettings(network="bridge"), image_id="sha256:x",
                       image_tag="t", built=False, name="n", password="pw", pick_port=pick)
    assert t.port == 21 and t.http_port == 8080 and t.kwargs["environment"]["MAX_BODY"] == str(1 << 30)


def _entrypoint_command(name: str, env: dict[str, str], tmp: Path) -> tuple[list[str], str]:
    """Run ``servers/<name>/container/entrypoint.sh`` under /bin/sh with ``env``, its
    container paths moved under ``tmp`` and its final ``exec`` replaced by printing the
    command: (the argv it would exec, the nginx config it rendered or "")."""
    text = (SERVERS_DIR / name / "container" / "entrypoint.sh").read_text()
    for path in ("/srv/ftp", "/etc/xferlab", "/run/xferlab"):
        text = text.replace(path, str(tmp / path.strip("/").replace("/", "_")))
    text = text.replace("/opt/xferlab/nginx.conf.tmpl", str(SERVERS_DIR / "nginx" / "nginx.conf.tmpl"))
    lines = text.rstrip("\n").splitlines()
    assert lines[-1].startswith("exec "), lines[-1]
    lines[-1] = "printf '%s\\n' " + lines[-1][len("exec "):]
    r = subprocess.run(["/bin/sh", "-c", "\n".join(lines), "entrypoint"], env={"PATH": os.environ["PATH"], **env},
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    conf = tmp / "run_xferlab" / "nginx.conf"
    return r.stdout.splitlines(), conf.read_text() if conf.exists() else ""


@pytest.mark.parametrize("variant, bound", [({}, DEFAULT_MAX_BODY), ({"max_body": "64m"}, 64 << 20)])
@pytest.mark.parametrize("name", sorted(HTTP_SERVERS))
def test_every_http_container_gets_the_upload_bound(tmp_path: Path, name: str, variant: dict, bound: int):
    """Under the docker backend every HTTP server, tpd included, gets the variant's
    ``max_body`` (default 1 GiB) as ``MAX_BODY``, and its entrypoint passes it on (run
    here with the container's paths moved under tmp_path); without ``MAX_BODY`` each
    entrypoint falls back to the same 1 GiB."""
    from runner.backends.docker.container import ContainerSettings, container_spec

    s = container_spec(ServerRequest(name, variant=variant), ContainerSettings(network="bridge"),
                       image_id="sha256:x", image_tag="t", built=False, name="n", password="pw",
                       pick_port=lambda: 40001)
    env = s.kwargs["environment"]
    assert env["MAX_BODY"] == str(bound)
    argv, conf = _entrypoint_command(name, env, tmp_path / "given")
    assert max_body_of(argv, conf) == bound, argv
    argv, conf = _entrypoint_command(name, {k: v for k, v in env.items() if k != "MAX_BODY"}, tmp_path / "unset")
    assert max_body_of(argv, conf) == DEFAULT_MAX_BODY, argv


def test_list_stored_files(tmp_path: Path):
    up = tmp_path / "uploads"
    up.mkdir()
    (up / "b.bin").write_bytes(b"x" * 10)
    (up / "a.bin").write_bytes(b"")
    (up / "sub").mkdir()
    os.symlink(up / "b.bin", up / "link")
    assert list_stored_files(up) == [("a.bin", 0), ("b.bin", 10)]
    with pytest.raises(FileNotFoundError):
        list_stored_files(tmp_path / "missing")
    assert check_subdir("uploads/") == "uploads" and check_subdir("") == ""
    for bad in ("/etc", "../x", "a/../../b"):
        with pytest.raises(ValueError):
            check_subdir(bad)
