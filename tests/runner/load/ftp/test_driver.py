"""The asyncio FTP generator as driver ``xferlab-ftp`` (registry, run, loadgen --driver),
against the real pyftpdlib server of conftest."""
from __future__ import annotations

import argparse
import json

import pytest

from runner.catalogue.workloads import WORKLOADS, WorkloadParams
from runner.load.registry import DEFAULT_DRIVER, LoadError, driver_names, driver_record, get_driver


def test_registry():
    assert driver_names()[0] == DEFAULT_DRIVER == "xferlab-ftp"
    d = get_driver("xferlab-ftp")
    assert d.protocols == ("ftp",) and set(d.workloads) == {n for n, w in WORKLOADS.items() if w.protocol == "ftp"}
    d.check()
    assert driver_record("xferlab-ftp")["name"] == "xferlab-ftp"
    with pytest.raises(ValueError, match="unknown driver 'ab'; known: xferlab-ftp"):
        get_driver("ab")


def test_driver_runs_a_phase(target):
    r = get_driver("xferlab-ftp").run("login", target, WorkloadParams(clients=5, op_timeout=10, phase_timeout=30))
    assert r.workload == "login" and r.ops == 5 and r.error_count == 0 and len(r.latencies_ms) == 5


def test_driver_raises_load_error_when_nothing_measured(pyftpd):
    from runner.load.target import Target

    host, port, _ = pyftpd
    with pytest.raises(LoadError):
        get_driver("xferlab-ftp").run("login", Target(host, port, "nobody", "wrong"),
                                      WorkloadParams(clients=1, op_timeout=5, phase_timeout=10))


def _loadgen(capsys, target, **kw) -> tuple[int, dict]:
    from runner.multihost.loadgen import add_arguments, main

    p = argparse.ArgumentParser()
    add_arguments(p)
    argv = ["--host", target.host, "--port", str(target.port), "--user", target.user,
            "--password", target.password, "--workload", "login",
            "--params", json.dumps({"clients": 3, "op_timeout": 10, "phase_timeout": 30})]
    for k, v in kw.items():
        argv += [f"--{k}", v]
    rc = main(p.parse_args(argv))
    return rc, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_loadgen_runs_the_named_driver(target, capsys):
    rc, doc = _loadgen(capsys, target, driver="xferlab-ftp")
    assert rc == 0 and doc["driver"] == "xferlab-ftp" and doc["result"]["ops"] == 3
    rc, doc = _loadgen(capsys, target, driver="ab")
    assert rc == 2 and "unknown driver 'ab'" in doc["error"]
    rc, doc = _loadgen(capsys, target, driver="wrk")  # an HTTP driver: not for the login workload
    assert rc == 2 and "driver 'wrk' cannot run workload 'login'" in doc["error"]
