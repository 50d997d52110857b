"""Cells over a shaped 100 Mbit link with the docker backend: the link's server end is
put into the server container's own namespace (runner.backends.docker.backend
.link_container). Builds the server images it needs when they are missing (cached: a
no-op when built), whatever ran before it; needs root, ip and tc."""
from __future__ import annotations

import pytest

from runner.net import link as linknet
from tests.runner.cell.test_link_cell import MIB, PAYLOAD_MIB_S, run_link_cell
from tests.support.skips import not_root, skip_if_problem

pytestmark = [pytest.mark.docker, pytest.mark.integration, pytest.mark.timeout(300),
              skip_if_problem(linknet.base_problem(), machine=not_root())]


def _cell(dbackend, server: str, driver: str, workload: str, link: str = "100mbit", variant=None, **params):
    """The cell's outcome (test_link_cell.run_link_cell with the docker backend)."""
    return run_link_cell(dbackend, server, driver, workload, link, spec={"backend": "docker"}, variant=variant,
                         **params)[1]


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
