"""The checks every HTTPS server passes, on either backend (test_https_servers.py: local
processes; test_https_docker.py: containers): xferlab-http's download and upload over
TLS verified against the campaign's CA, the negotiated protocol and cipher and the
handshake times recorded, and a client trusting another CA counting ``tls_verify``."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from runner.catalogue.workloads import WorkloadParams
from runner.load.base import LoadError
from runner.load.http.driver import DRIVER
from runner.load.target import Target
from runner.tls.certs import make_certificates
from tests.support.tls_reference import assert_handshakes_within, reference_handshakes_ms

SMALL = dict(clients=3, duration=0.3, file_size=256 << 10, body_size=64 << 10, op_timeout=20, phase_timeout=60)


def check_https_target(t: Target, tmp_path: Path) -> None:
    """Run both HTTP workloads against the HTTPS target ``t`` and the wrong-CA download;
    AssertionError names what failed."""
    assert t.tls is not None and t.tls.mode == "https"
    reference = reference_handshakes_ms(t)
    for wl in ("http_download", "http_upload"):
        r = DRIVER.run(wl, t, WorkloadParams(**SMALL))
        assert r.successful > 0 and not r.errors and not r.non_2xx, (wl, r.errors, r.non_2xx, r.notes)
        assert r.tls["protocol"] in ("TLSv1.2", "TLSv1.3") and r.tls["cipher"], r.tls
        assert len(r.tls_handshake_ms) >= 3
        reference += reference_handshakes_ms(t)
        assert_handshakes_within(r.tls_handshake_ms, reference, concurrent=SMALL["clients"])
    other = make_certificates(tmp_path / "other")
    wrong = dataclasses.replace(t, tls=dataclasses.replace(t.tls, ca_file=str(other.ca_cert)))
    try:
        r = DRIVER.run("http_download", wrong, WorkloadParams(**SMALL))
    except LoadError as e:  # nothing could be measured: the reason names the kind
        assert "tls_verify" in str(e)
    else:
        assert r.successful == 0 and r.errors.get("tls_verify", 0) > 0, r.errors
