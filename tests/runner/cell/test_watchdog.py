"""The cell watchdog (runner.cell.watchdog): a cell whose stage hangs past the cell's bound is
failed naming the stage, and the campaign goes on to the next cell."""
from __future__ import annotations

import time

import pytest

from runner.cell.watchdog import CellWatchdog, cell_bound_s
from tests.support.hostile_ftp import LOGIN_ONLY, HostileFTP


def test_cell_bound_adds_up_its_parts():
    assert cell_bound_s(300, None, 900) == 1500
    assert cell_bound_s(1, 5, 2, fixture_bytes=100_000_000) == pytest.approx(5 + 2 + 2 + 2)
    with pytest.raises(ValueError, match="bound must be > 0"):
        CellWatchdog(0)


def test_campaign_goes_on_past_a_cell_that_hangs(engine, monkeypatch):
    """An external server that logs in, then never answers: the first cell's load waits
    for a reply with no timeout of its own; the watchdog fails it (about 2 s: warm-up
    and phase 2 x 0.5 s + allowance 1 s) naming the stage, and the next cell (a real
    ``login`` workload of xferlab-ftp against the same server) is done."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from runner.campaign.loop import run_campaign
    from runner.cell import watchdog
    from runner.config import get_settings
    from runner.load import registry as drivers
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell

    monkeypatch.setitem(drivers.DRIVER_MODULES, "test-hang", "tests.support.hang_driver")
    monkeypatch.setenv("XFERLAB_CELL_ALLOWANCE", "1")
    monkeypatch.setattr(watchdog, "UNBLOCK_GRACE_S", 0.5)
    get_settings.cache_clear()
    small = {"file_size": "1K", "transfer_size": "1K", "phase_timeout": 0.5, "op_timeout": 5,
             "connect_timeout": 5, "driver": "test-hang"}
    try:
        with HostileFTP(LOGIN_ONLY, lifetime=30) as srv:
            spec = parse_spec({"name": "hang", "repeats": 1, "backend": "local", "pinning": {}, "warmup": False,
                               "servers": [{"name": "external", "external": {
                                   "host": "127.0.0.1", "port": srv.port, "user": "u", "password": "p"}}],
                               "workloads": [{"name": "login", "params": {**small, "clients": 2}},
                                             {"name": "login", "params": {**small, "clients": 1}}]})
            with Session(engine) as s:
                cid = crud.create_campaign(s, spec=spec, backend="local").id
                s.commit()
            t0 = time.monotonic()
            assert run_campaign(engine, cid) == 2
            took = time.monotonic() - t0
    finally:
        get_settings.cache_clear()
    with Session(engine) as s:
        cells = list(s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.seq)))
    assert [c.status for c in cells] == ["failed", "done"], [c.error for c in cells]
    assert cells[0].error.startswith("cell watchdog: stage 'phase' still running after 2 s"), cells[0].error
    assert "allowance 1 s" in cells[0].error and "server stopped" in cells[0].error
    assert 2.0 <= took <= 10.0, took
