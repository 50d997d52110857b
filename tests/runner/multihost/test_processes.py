"""client_processes: the N clients of a phase split across local load-generator
processes and merged as client hosts are (runner.multihost.processes), against the real
pyftpdlib server of these tests; and inside a server's own network namespace."""
from __future__ import annotations

import os

import pytest

from runner.catalogue.workloads import WorkloadParams
from runner.multihost.processes import run_client_processes, splits
from runner.spec.model import CampaignSpec
from tests.runner.net.test_netns import ns_server  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(120)


def _spec(**kw) -> CampaignSpec:
    return CampaignSpec.model_validate({"servers": [{"name": "tpd"}], "workloads": [{"name": "login"}], **kw})


def test_how_many_processes_and_which_workloads_split():
    assert _spec().client_process_count() == 1  # not pinned: one process, as before
    assert _spec(pinning={"server": [0]}).client_process_count() == 1
    if (os.cpu_count() or 1) >= 2:
        assert _spec(pinning={"server": [0], "client": [1]}).client_process_count() == 1
    if (os.cpu_count() or 1) >= 3:
        assert _spec(pinning={"server": [0], "client": [1, 2]}).client_process_count() == 2
    assert _spec(client_processes=3).client_process_count() == 3
    for bad in (0, 65, "many", 2.5):
        with pytest.raises(ValueError, match="client_processes"):
            _spec(client_processes=bad)
    assert splits("login", 300, 2) and splits("stor_concurrent", 300, 4) and splits("quit", 2, 2)
    assert not splits("login", 300, 1) and not splits("login", 1, 4)
    assert not splits("retr", 300, 4) and not splits("stor", 300, 4)  # one stream stays one stream


@pytest.mark.parametrize("workload", ["login", "stor_concurrent", "retr_concurrent"])
def test_two_processes_merge_into_one_phase(remote_target, workload):
    params = WorkloadParams(clients=20, file_size=1 << 20, login_mode="concurrent")
    result, rows = run_client_processes(workload, remote_target, params, 2, cpus=sorted(os.sched_getaffinity(0)),
                                        start_delay=3.0)
    assert result.error_count == 0, result.errors
    assert result.ops == 20 and len(result.clients) == (20 if workload != "login" else len(result.clients))
    if workload != "login":
        assert result.bytes == 20 << 20
    assert [r.stat for r in rows] == ["process 1", "process 2"]
    assert [r.value for r in rows] == [10.0, 10.0]
    assert all(r.raw["late_s"] is not None and r.raw["late_s"] < 3.0 for r in rows)
    assert result.notes[0].startswith("multi-process: load from 2 client processes")
    assert result.busiest_client_utilization is not None
    assert result.started_at is not None and result.ended_at is not None
    assert result.elapsed_s == pytest.approx(result.ended_at - result.started_at)


def test_processes_join_the_server_namespace(ns_server):  # noqa: F811
    from runner.load.target import Target
    from tests.support.pyftpd import PASSWORD, USER

    _proc, port, path = ns_server
    target = Target("127.0.0.1", port, USER, PASSWORD, netns=path)
    result, rows = run_client_processes("login", target, WorkloadParams(clients=10, login_mode="concurrent"), 2)
    assert result.error_count == 0 and result.ops == 10 and len(rows) == 2


def test_no_process_measuring_is_an_error_naming_each(remote_target):
    from dataclasses import replace

    from runner.multihost.inventory import MultiHostError

    bad = replace(remote_target, password="wrong")
    with pytest.raises(MultiHostError, match=r"no client process measured anything: process 1: .*process 2: "):
        run_client_processes("login", bad, WorkloadParams(clients=4, login_mode="concurrent"), 2, start_delay=2.0)


@pytest.mark.parametrize("driver", ["xferlab-http", "wrk"])
def test_http_phase_split_over_two_processes(tmp_path, driver):
    import shutil

    from runner.load.target import Target
    from tests.support.httpserver import HttpTestServer

    if driver == "wrk" and shutil.which("wrk") is None:
        pytest.skip("wrk not installed")
    params = WorkloadParams(clients=4, duration=1, file_size=10_000)
    with HttpTestServer(tmp_path) as srv:
        target = Target("127.0.0.1", 1, "-", "-", root=tmp_path, http_port=srv.port)
        result, rows = run_client_processes("http_download", target, params, 2, start_delay=3.0, driver=driver)
    assert result.successful > 0 and result.network_failed == 0 and not result.non_2xx
    assert result.requests == result.successful and result.bytes == result.successful * 10_000
    assert [r.stat for r in rows] == ["process 1", "process 2"]

