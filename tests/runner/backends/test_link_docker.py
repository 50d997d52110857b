"""Cells over a shaped 100 Mbit link with the docker backend: the link's server end is
put into the server container's own namespace (runner.backends.docker.backend
.link_container). Uses the server images as they are (never builds one: skipped when an
image is missing), needs root, ip and tc."""
from __future__ import annotations

import os

import pytest

from runner.backends.base import ServerSkipped
from runner.cell.local import run_local_cell
from runner.net import link as linknet
from runner.spec.model import parse_spec
from runner.spec.request import ServerRequest
from runner.store.models import Cell
from tests.runner.cell.test_link_cell import MIB, PAYLOAD_MIB_S
from tests.runner.support import driver_or_skip

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(300),
              pytest.mark.skipif(linknet.base_problem() is not None, reason=str(linknet.base_problem()))]


#: The images are used as they are (tests.runner.conftest's dbackend builds none).
DOCKER_BUILD = False


def _mine() -> list[str]:
    return [n for n in linknet.lab_namespaces() if n.startswith(f"xl-{os.getpid()}-")]


def _cell(dbackend, server: str, driver: str, workload: str, link: str = "100mbit", variant=None, **params):
    driver_or_skip(driver)
    try:
        dbackend.image(ServerRequest(server))
    except ServerSkipped as e:
        pytest.skip(str(e))
    spec = parse_spec({"name": "link", "repeats": 1, "warmup": True, "driver": driver, "pinning": {},
                       "backend": "docker", "link": [link], "servers": [{"name": server, "variant": variant or {}}],
                       "workloads": [{"name": workload, "params": params}]})
    srv = spec.servers[0]
    cell = Cell(id=1, seq=0, server=server, server_label=srv.display(), server_spec=srv.model_dump(mode="json"),
                workload=workload, params=spec.workloads[0].params.model_dump(mode="json"), params_key="", repeat=0)
    out = run_local_cell(cell, spec, dbackend)
    assert _mine() == [], "the cell's link was not deleted"
    return out


@pytest.mark.parametrize("server", ["tpd", "vsftpd"])
def test_retr_over_100mbit_into_the_container(dbackend, server):
    out = _cell(dbackend, server, "xferlab-ftp", "retr", transfer_size=8 * MIB, duration=2.0)
    assert out.status == "done", out.error
    rows = {(s.metric, s.stat): s for s in out.samples}
    mib_s = rows[("throughput", "value")].value
    assert 0.9 * PAYLOAD_MIB_S <= mib_s <= 1.1 * PAYLOAD_MIB_S, f"{mib_s:.2f} MiB/s over 100mbit"
    assert rows[("link_qdisc", "server_sent_bytes")].value >= rows[("bytes", "value")].value
    assert out.build_info["link"]["server_address"] == "10.213.0.2"
    assert out.build_info["link"]["server_namespace"] == "container"
    # the server end is the container's namespace: the backend's sysctls (SYN cookies off)
    assert out.build_info["link"]["sysctls"]["server"]["net.ipv4.tcp_syncookies"] == "0"
    assert out.build_info["backend"] == "docker"


def test_wget_clients_over_the_link_into_vsftpd(dbackend):
    out = _cell(dbackend, "vsftpd", "wget", "retr_concurrent", clients=8, file_size=MIB)
    assert out.status == "done", out.error
    rows = {(s.metric, s.stat): s for s in out.samples}
    assert rows[("bytes", "value")].value == 8 * MIB
    assert rows[("elapsed", "value")].value >= 0.95 * 8 / PAYLOAD_MIB_S
    assert rows[("link_qdisc", "server_sent_bytes")].value >= 8 * MIB


def test_host_networking_is_skipped_with_the_reason(dbackend):
    out = _cell(dbackend, "tpd", "xferlab-ftp", "retr", variant={"network": "host"}, transfer_size=MIB, duration=0.3)
    assert out.status == "skipped"
    assert "needs the container's own network namespace" in out.error
