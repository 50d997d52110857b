"""Pairs of servers and workloads that cannot run: skipped cells with the reason, or a
spec error when no pair of the spec can run (runner.pairing)."""
from __future__ import annotations

import pytest

from runner.pairing import no_valid_pair, pair_skip_reason
from runner.spec import SpecError, parse_spec
from runner.workloads import WorkloadParams


def test_protocol_mismatch_names_both_sides():
    assert pair_skip_reason("go-http", "stor", WorkloadParams()) == \
        "go-http does not speak FTP: stor is an FTP workload"
    assert pair_skip_reason("pyftpdlib", "http_download", {}) == \
        "pyftpdlib does not speak HTTP: http_download is an HTTP workload"
    assert pair_skip_reason("tpd", "stor", {}) is None
    assert pair_skip_reason("tpd", "http_upload", {"method": "post"}) is None


def test_nginx_post_is_skipped_with_the_catalogue_reason():
    why = pair_skip_reason("nginx", "http_upload", WorkloadParams(method="post"))
    assert why is not None and "DAV" in why
    assert pair_skip_reason("nginx", "http_upload", WorkloadParams(method="put")) is None
    assert pair_skip_reason("nginx", "http_download", {}) is None


def _spec(servers, workloads, driver="xferlab-ftp"):
    return {"name": "p", "repeats": 1, "driver": driver, "servers": [{"name": s} for s in servers],
            "workloads": workloads}


def test_spec_without_any_valid_pair_is_an_error():
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(["go-http", "nginx"], [{"name": "stor"}]))
    assert "no server of the spec can run any of its workloads" in str(e.value)
    assert "go-http does not speak FTP" in str(e.value)
    with pytest.raises(SpecError, match="DAV"):
        parse_spec(_spec(["nginx"], [{"name": "http_upload", "params": {"method": "post"}}], "xferlab-http"))


def test_spec_with_some_valid_pairs_parses():
    spec = parse_spec(_spec(["go-http", "pyftpdlib"], [{"name": "http_upload"}], "xferlab-http"))
    assert no_valid_pair(spec.servers, spec.workloads) is None
