"""End to end: ``xferlab run SPEC --tls explicit`` runs FTPS cells through the CLI, stores
the handshake and protocol rows, skips Twisted with its reason, and the campaign's RST
export parses cleanly with docutils."""
from __future__ import annotations

import io
import subprocess
import sys

import docutils.core
import docutils.nodes
import pytest
import yaml
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from runner.store.models import Campaign

pytestmark = [pytest.mark.integration, pytest.mark.slow]

XFERLAB = [sys.executable, "-m", "runner.cli"]
SMALL = {"clients": 5, "transfer_size": "1M", "duration": 0.2, "op_timeout": 20, "phase_timeout": 60}


def _run(args, env):
    p = subprocess.run(XFERLAB + args, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"xferlab {' '.join(args)} exited {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def test_run_tls_explicit_end_to_end_and_rst_export(tmp_path, xferlab_env, db_url):
    xferlab_env["XFERLAB_DATA_DIR"] = str(tmp_path / "data")  # the campaign's certificates go there
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "ftps", "repeats": 1,
                                    "servers": [{"name": "pyftpdlib"}, {"name": "twisted"}],
                                    "workloads": [{"name": "login", "params": SMALL},
                                                  {"name": "retr", "params": SMALL}]}))
    out = _run(["run", str(spec), "--tls", "explicit", "--no-pin", "--backend", "local"], xferlab_env)
    assert "pyftpdlib [tls=explicit]" in out, out
    with Session(create_engine(db_url)) as s:
        camp = s.get(Campaign, 1)
        cells = {(c.server, c.workload): c for c in camp.cells}
        assert cells[("twisted", "login")].status == "skipped"
        assert "Twisted's FTP server" in cells[("twisted", "login")].error
        for wl in ("login", "retr"):
            c = cells[("pyftpdlib", wl)]
            assert c.status == "done", c.error
            rows = {(x.metric, x.stat): x for x in c.samples}
            assert ("tls", "version") in rows, sorted(rows)
            assert rows[("tls", "version")].raw["protocol"] in ("TLSv1.2", "TLSv1.3")
            assert rows[("tls", "version")].raw["key_type"] == "ecdsa-p256"
            assert rows[("tls_handshake", "p50")].value > 0
        # RETR repeats 1 MiB transfers back to back for 0.2 s; elapsed is the sum of their spans:
        # at least the 0.2 s less the loop's gaps, at most 0.2 s plus the last (longest) transfer.
        # Each confirmed transfer is exactly 1 MiB, one stored latency each.
        spans_ms = rows[("latency", "p50")].raw
        moved, elapsed = rows[("bytes", "value")].value, rows[("elapsed", "value")].value
        assert len(spans_ms) >= 1 and moved == len(spans_ms) * 2**20
        assert abs(elapsed - sum(spans_ms) / 1000.0) <= 1e-3 * len(spans_ms)  # spans rounded to 1 us
        assert 0.9 * SMALL["duration"] <= elapsed <= SMALL["duration"] + max(spans_ms) / 1000.0 + 0.01
        mib = moved / 2**20
        assert mib / (SMALL["duration"] + max(spans_ms) / 1000.0 + 0.01) <= rows[("throughput", "value")].value \
            <= mib / (0.9 * SMALL["duration"])
    assert (tmp_path / "data" / "tls" / "campaign-1-ecdsa-p256" / "ca.pem").is_file()
    rst = _run(["export", "1", "--format", "rst"], xferlab_env)
    assert "pyftpdlib [tls=explicit]" in rst
    stream = io.StringIO()
    doctree = docutils.core.publish_doctree(rst, settings_overrides={"report_level": 2, "halt_level": 2,
                                                                     "warning_stream": stream})
    assert stream.getvalue() == "" and not list(doctree.findall(docutils.nodes.system_message))
    assert list(doctree.findall(docutils.nodes.table))


def test_run_tls_https_end_to_end(tmp_path, xferlab_env, db_url):
    xferlab_env["XFERLAB_DATA_DIR"] = str(tmp_path / "data")
    spec = tmp_path / "spec.yaml"
    params = {"clients": 3, "duration": 0.3, "body_size": 4096, "op_timeout": 20, "phase_timeout": 60}
    spec.write_text(yaml.safe_dump({"name": "https", "repeats": 1, "driver": "xferlab-http",
                                    "servers": [{"name": "nginx"}, {"name": "go-http"}],
                                    "workloads": [{"name": "http_upload", "params": params}]}))
    out = _run(["run", str(spec), "--tls", "https", "--no-pin", "--backend", "local"], xferlab_env)
    assert "nginx [tls=https]" in out, out
    with Session(create_engine(db_url)) as s:
        cells = {c.server: c for c in s.get(Campaign, 1).cells}
        for name in ("nginx", "go-http"):
            cell = cells[name]
            if cell.status == "skipped":
                pytest.skip(cell.error)
            assert cell.status == "done", cell.error  # every upload stored (the stored-file check)
            rows = {(x.metric, x.stat): x for x in cell.samples}
            assert rows[("tls", "version")].raw["mode"] == "https" and rows[("tls_handshake", "count")].value >= 3
