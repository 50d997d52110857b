"""Pairs of servers and workloads that cannot run: skipped cells with the reason, or a
spec error when no pair of the spec can run (runner.catalogue.pairing)."""
from __future__ import annotations

import pytest

from runner.catalogue.pairing import no_valid_pair, pair_skip_reason
from runner.catalogue.workloads import WorkloadParams
from runner.spec.model import SpecError, parse_spec


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


def test_local_cell_skips_a_pair_before_starting_anything():
    from runner.cell.local import run_local_cell
    from runner.store.models import Cell

    class _NoBackend:
        name = "none"

        def check(self, req):  # noqa: ANN001
            raise AssertionError("a skipped pair must not reach the backend")

        start = check

    spec = parse_spec(_spec(["nginx", "tpd"], [{"name": "http_upload", "params": {"method": "post"}}], "xferlab-http"))
    nginx = spec.servers[0]
    cell = Cell(id=1, seq=0, server="nginx", server_label="nginx", server_spec=nginx.model_dump(mode="json"),
                workload="http_upload", params=spec.workloads[0].params.model_dump(mode="json"), params_key="",
                repeat=0)
    out = run_local_cell(cell, spec, _NoBackend())
    assert out.status == "skipped" and "DAV" in (out.error or "")
