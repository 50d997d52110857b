"""The worker (runner.campaign.worker) claims queued campaigns: `xferlab worker --once` as a real subprocess."""
from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from runner.spec.model import parse_spec
from runner.store.models import Campaign
from tests.dashboard.conftest import run_worker_once

pytestmark = pytest.mark.integration


def test_worker_once_runs_queued_campaign(engine, xferlab_env):
    spec = parse_spec({"name": "w", "repeats": 1, "backend": "local",
                       "servers": [{"name": "pyftpdlib", "version": "2.2.0"}],
                       "workloads": [{"name": "login", "params": {"clients": 5, "op_timeout": 20,
                                                                 "phase_timeout": 60}}]})
    cid, p = run_worker_once(engine, spec, xferlab_env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "worker" in p.stderr and "started" in p.stderr
    with Session(engine) as s:
        camp = s.get(Campaign, cid)
        assert camp.status == "done" and camp.cells_done == 1, [c.error for c in camp.cells]
