"""``client_options`` as a workload parameter (cell key, title, spec validation per driver)."""
from __future__ import annotations

import pytest

from runner.catalogue.workloads import WORKLOADS, WorkloadParams, params_key
from runner.spec.model import SpecError, parse_spec

BASE = {"servers": [{"name": "pyftpdlib"}]}


def test_empty_options_leave_the_cell_key_as_before():
    key = params_key("retr_concurrent", WorkloadParams(clients=10))
    assert key == ("buffer_size=262144,clients=10,file_size=10485760,login_mode=concurrent,op_timeout=30.0,"
                   "passive=pasv")
    assert WORKLOADS["retr_concurrent"].title_for(WorkloadParams(clients=10)) == \
        "10 concurrent clients (RETR 10M file)"
    assert params_key("retr", WorkloadParams()) == ("buffer_size=262144,duration=3.0,op_timeout=30.0,passive=pasv,"
                                                    "transfer_size=268435456")
    assert "client_options=xfer:buffer-size=0x20000" in params_key(
        "retr", WorkloadParams(client_options={"xfer:buffer-size": "0x20000"}))


def test_options_are_part_of_the_key_and_title():
    p = WorkloadParams(clients=10, client_options={"xfer:buffer-size": 0x20000, "net:socket-buffer": "0"})
    assert p.client_options == {"xfer:buffer-size": "131072", "net:socket-buffer": "0"}
    key = params_key("retr_concurrent", p)
    assert key == ("buffer_size=262144,client_options=net:socket-buffer=0;xfer:buffer-size=131072,clients=10,"
                   "file_size=10485760,login_mode=concurrent,op_timeout=30.0,passive=pasv")
    assert key != params_key("retr_concurrent", WorkloadParams(clients=10))
    assert WORKLOADS["stor_concurrent"].title_for(p) == \
        "10 concurrent clients (STOR 10M file) [xfer:buffer-size=131072, net:socket-buffer=0]"
    assert WorkloadParams(client_options={"--tcp-nodelay": True}).client_options == {"--tcp-nodelay": "yes"}
    assert WORKLOADS["retr_concurrent"].title_for(WorkloadParams(clients=1, client_options={"--no-buffer": ""})) \
        .endswith("[--no-buffer]")
    with pytest.raises(ValueError, match="1..100"):
        WorkloadParams(client_options={"x:y": "v" * 101})


def _spec(driver, workload, **params):
    return parse_spec({**BASE, "driver": driver, "workloads": [{"name": workload, "params": params}]})


def test_spec_validates_options_per_driver():
    assert _spec("lftp", "retr_concurrent", client_options={"xfer:buffer-size": "0x20000"}).driver == "lftp"
    assert _spec("curl", "stor_concurrent", client_options={"--tcp-nodelay": ""}).driver == "curl"
    with pytest.raises(SpecError, match=r"workloads.0: driver 'lftp': client_options: unknown lftp option "
                                        r"'xfer:nope'"):
        _spec("lftp", "retr_concurrent", client_options={"xfer:nope": "1"})
    with pytest.raises(SpecError, match="unknown curl option '--limit-rate'"):
        _spec("curl", "retr_concurrent", client_options={"--limit-rate": "1M"})
    with pytest.raises(SpecError, match=r"driver 'xferlab-ftp': takes no client_options \(drivers that do: "
                                        r"lftp, wget, curl\)"):
        _spec("xferlab-ftp", "retr_concurrent", client_options={"xfer:buffer-size": "1"})
    with pytest.raises(SpecError, match="driver 'wget' cannot run stor_concurrent"):
        _spec("wget", "stor_concurrent")
    with pytest.raises(SpecError, match="wget sends PASV"):
        _spec("wget", "retr_concurrent", passive="epsv")
    assert _spec("lftp", "retr", client_options={"xfer:buffer-size": "0x20000"}).driver == "lftp"
    with pytest.raises(SpecError, match="driver 'wget' cannot run stor "):
        _spec("wget", "stor")
    with pytest.raises(SpecError, match="driver 'curl' cannot run login"):
        _spec("curl", "login")
