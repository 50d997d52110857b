"""End to end: a spec with an HTTP and an FTP workload and no ``driver:`` runs through
``xferlab run`` on tpd (local backend): the HTTP cell is driven by xferlab-http and the
FTP cell by xferlab-ftp, as each cell's environment records."""
from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from runner.store.models import Campaign

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_http_and_ftp_workloads_without_a_driver_each_get_their_protocols(tmp_path, xferlab_env, db_url):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "default driver", "repeats": 1, "servers": [{"name": "tpd"}],
                                    "workloads": [
                                        {"name": "http_upload", "params": {"clients": 3, "duration": 0.3,
                                                                           "body_size": 4096, "op_timeout": 20,
                                                                           "phase_timeout": 60}},
                                        {"name": "login", "params": {"clients": 3, "op_timeout": 20,
                                                                     "phase_timeout": 60}}]}))
    p = subprocess.run([sys.executable, "-m", "runner.cli", "run", str(spec), "--no-pin", "--backend", "local"],
                       env=xferlab_env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "cannot run http_upload" not in p.stdout + p.stderr
    with Session(create_engine(db_url)) as s:
        cells = {c.workload: c for c in s.get(Campaign, 1).cells}
        if cells["http_upload"].status == "skipped":
            pytest.skip(cells["http_upload"].error)
        drivers = {}
        for wl in ("http_upload", "login"):
            c = cells[wl]
            assert c.status == "done", c.error
            assert c.environment is not None
            drivers[wl] = c.environment.data["driver"]["name"]
        assert drivers == {"http_upload": "xferlab-http", "login": "xferlab-ftp"}
        rows = {(x.metric, x.stat): x.value for x in cells["http_upload"].samples}
        assert rows[("requests_rate", "value")] > 0
