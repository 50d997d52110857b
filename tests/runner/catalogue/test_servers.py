"""The server catalogue is the one record per server: every server in it can be started by
both backends (a local recipe and an image), and every recipe, image and Debian-packaged
server is in it."""
from __future__ import annotations

import pytest

from runner.backends.docker.images import SERVER_IMAGES
from runner.backends.local.debs import DEB_SERVERS
from runner.backends.local.recipes import RECIPES
from runner.catalogue.servers import (
    DOCKER_HTTPS_SERVERS,
    FTP,
    FTPS_MODES,
    HTTP,
    HTTPS_SERVERS,
    SERVERS,
    tls_skip_reason,
)

STARTED = {n for n in SERVERS if n != "external"}  # external: started elsewhere


def test_every_server_has_a_recipe_and_an_image():
    assert {r.name for r in RECIPES} == STARTED
    assert set(SERVER_IMAGES) == STARTED


def test_debian_servers_come_from_the_catalogue():
    assert set(DEB_SERVERS) == {"vsftpd", "proftpd", "pureftpd"}
    for name, info in DEB_SERVERS.items():
        assert info.binary and info.debian, name


@pytest.mark.parametrize("name", sorted(SERVERS))
def test_a_record_is_consistent(name):
    info = SERVERS[name]
    assert info.protocols <= {FTP, HTTP} and info.protocols
    if info.ftps_modes:
        assert FTP in info.protocols and set(info.ftps_modes) <= {"explicit", "implicit"}
    if info.https or info.upload_methods or info.workers:
        assert HTTP in info.protocols
    assert not info.https_docker or info.https
    for mode in ("explicit", "implicit"):
        why = tls_skip_reason(name, mode)
        assert (why is None) == (mode in FTPS_MODES.get(name, ())), (name, mode, why)
    assert (tls_skip_reason(name, "https") is None) == (name in HTTPS_SERVERS)
    assert DOCKER_HTTPS_SERVERS <= HTTPS_SERVERS


def test_the_names_are_the_records():
    from runner.catalogue.servers import SERVER_NAMES

    assert tuple(SERVERS) == SERVER_NAMES
