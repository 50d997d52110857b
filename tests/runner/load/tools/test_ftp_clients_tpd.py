"""The real-client drivers against tpd (servers/tpd, built by its Makefile and started by
the local backend on loopback): 4 processes, 1 MiB each, downloads and uploads."""
from __future__ import annotations

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.spec.request import ServerRequest
from tests.runner.load.tools.test_ftp_clients import MIB, RUNS, check_result
from tests.runner.support import driver_or_skip, start_or_skip

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def tpd(backend):
    handle = start_or_skip(backend, ServerRequest("tpd"))
    try:
        yield handle
    finally:
        handle.stop()


@pytest.mark.parametrize(("name", "workload"), RUNS)
def test_tpd(tpd, name, workload):
    d = driver_or_skip(name)
    r = d.run(workload, tpd.target, WorkloadParams(clients=4, file_size=MIB))
    check_result(r, workload, 4, MIB)
    if workload == "stor_concurrent" and tpd.target.root is not None:
        assert not [p for p in tpd.target.root.iterdir() if p.name.startswith("xferlab-stor-")]


@pytest.mark.parametrize("options", [{}, {"xfer:buffer-size": "0x20000"}])
def test_tpd_lftp_single_stream(tpd, options):
    """Seed 003's shape: one lftp download after another, with and without a larger
    xfer:buffer-size (figures not compared: a test, not a benchmark)."""
    d = driver_or_skip("lftp")
    r = d.run("retr", tpd.target, WorkloadParams(transfer_size=4 * MIB, duration=0.3, client_options=options))
    assert r.errors == {} and r.ops >= 1 and r.bytes == r.ops * 4 * MIB, r.notes
    assert all(c.max_rss > 1 << 20 for c in r.clients)
