"""Server reuse (runner.cell.server_reuse): the pool's rules with stand-in handles, the
store's claim preference, and real campaigns of tpd on this machine under each policy:
how many servers started, in which order the cells ran, and that memory figures come
only from cells that started their server."""
from __future__ import annotations

import re
import sys
import typing
from types import SimpleNamespace

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.cell.server_reuse import REUSE_POLICIES, ServerPool, reuse_key
from runner.spec.model import CampaignSpec, SpecError, parse_spec
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell, Sample
from tests.runner.support import local_server_or_skip
from tests.support.skips import lacks_if


class _Handle:
    def __init__(self, alive: bool = True) -> None:
        self.running = alive
        self.stops = 0

    def alive(self) -> bool:
        return self.running

    def exit_reason(self) -> str | None:
        return None if self.running else "exited (code 1)"

    def stop(self) -> None:
        self.stops += 1
        self.running = False


def _cell(**kw):
    base = dict(campaign_id=1, server_label="tpd", workload="retr", params_key="retr|x", repeat=0)
    base.update(kw)
    return SimpleNamespace(**base)


def test_policies_match_the_spec_field():
    field = CampaignSpec.model_fields["server_reuse"].annotation
    assert typing.get_args(field) == REUSE_POLICIES
    with pytest.raises(ValueError, match="unknown server_reuse 'always'"):
        ServerPool("always")
    with pytest.raises(SpecError, match="server_reuse"):
        parse_spec({"servers": [{"name": "tpd"}], "workloads": [{"name": "retr"}], "server_reuse": "always"})


def test_reuse_keys():
    c = _cell()
    assert reuse_key("none", c) is None
    assert reuse_key("repeats", c) == {"campaign_id": 1, "server_label": "tpd", "workload": "retr",
                                       "params_key": "retr|x"}
    assert reuse_key("workloads", c) == {"campaign_id": 1, "server_label": "tpd", "repeat": 0}


def test_pool_keeps_a_server_for_matching_cells_only():
    pool = ServerPool("repeats")
    h = _Handle()
    assert pool.take(_cell()) is None and pool.prefer() is None
    assert pool.keep(_cell(), h, 1)
    assert pool.prefer() == reuse_key("repeats", _cell())
    with pytest.raises(RuntimeError):
        pool.keep(_cell(), _Handle(), 1)
    got = pool.take(_cell(repeat=1))                      # same group, next repeat
    assert got is not None and got.handle is h and got.cells == 1 and got.facts == {}
    assert pool.keep(_cell(repeat=1), h, 2, {"backlogs": [("0.0.0.0:21", 1024)]})
    got = pool.take(_cell(repeat=2))                      # what was read once comes with the server
    assert got.handle is h and got.cells == 2 and got.facts == {"backlogs": [("0.0.0.0:21", 1024)]}
    assert pool.keep(_cell(repeat=2), h, 3, got.facts)
    assert pool.take(_cell(workload="stor", params_key="stor|x")) is None   # another group: stopped
    assert h.stops == 1 and pool.live is None and pool.last_stop_s >= 0.0


def test_pool_never_reuses_a_dead_server_and_none_keeps_nothing():
    pool = ServerPool("workloads")
    h = _Handle()
    pool.keep(_cell(), h, 1)
    h.running = False                                     # it died between cells
    assert pool.take(_cell(workload="login")) is None and h.stops == 1
    none = ServerPool("none")
    assert not none.keep(_cell(), _Handle(), 1) and none.prefer() is None
    assert none.close() == 0.0


def test_claim_prefers_the_live_servers_cells(engine):
    spec = parse_spec({"name": "p", "repeats": 3, "servers": [{"name": "tpd"}, {"name": "vsftpd"}],
                       "workloads": [{"name": "retr"}, {"name": "login"}]})
    with Session(engine) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        first = crud.claim_next_cell(s, campaign_id=camp.id)
        assert (first.server, first.workload, first.repeat) == ("tpd", "retr", 0)     # repeat-major seq order
        nxt = crud.claim_next_cell(s, campaign_id=camp.id, prefer=reuse_key("repeats", first))
        assert (nxt.server, nxt.workload, nxt.repeat) == ("tpd", "retr", 1)           # the group's next repeat
        other = crud.claim_next_cell(s, campaign_id=camp.id, prefer={"server_label": "nobody"})
        assert (other.server, other.workload, other.repeat) == ("vsftpd", "retr", 0)  # none matches: seq order
        with pytest.raises(ValueError, match="not a cell column: colour"):
            crud.claim_next_cell(s, campaign_id=camp.id, prefer={"colour": "red"})


SMALL = {"clients": 5, "file_size": "256K", "transfer_size": "4M", "duration": 0.2, "op_timeout": 20,
         "phase_timeout": 60}


def _run(engine, name: str, policy: str, workloads: list[str]) -> int:
    """Run a local campaign of tpd, 3 repeats of ``workloads`` (SMALL) under ``policy``;
    returns its id, after checking that its cells ran and it ended ``done``."""
    from runner.campaign.loop import run_campaign

    spec = parse_spec({"name": f"{name}-{policy}", "repeats": 3, "backend": "local", "server_reuse": policy,
                       "servers": [{"name": "tpd"}], "workloads": [{"name": w, "params": SMALL} for w in workloads]})
    with Session(engine) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        cid = camp.id
    assert run_campaign(engine, cid) == 3 * len(workloads)
    with Session(engine) as s:
        cells = list(s.scalars(select(Cell).where(Cell.campaign_id == cid)))
        assert s.get(Campaign, cid).status == "done", [(c.workload, c.error) for c in cells]
    return cid


def _campaign(engine, policy: str):
    cid = _run(engine, "reuse", policy, ["retr", "login"])
    with Session(engine) as s:
        cells = list(s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.started_at)))
        started = {c.id for c in cells if s.scalars(select(Sample).where(
            Sample.cell_id == c.id, Sample.metric == "cell_time", Sample.stat == "start")).first()}
        with_memory = {c.id for c in cells if s.scalars(select(Sample).where(
            Sample.cell_id == c.id, Sample.metric == "server_mem_uss")).first()}
        cpu = {c.id for c in cells if s.scalars(select(Sample).where(
            Sample.cell_id == c.id, Sample.metric.like("server_cpu%"))).first()}
        backlog = {c.id: s.scalar(select(Sample.value).where(Sample.cell_id == c.id,
                                                            Sample.metric == "listen_backlog")) for c in cells}
        assert len(set(backlog.values())) == 1 and None not in backlog.values(), backlog  # read once, kept
        return [(c.workload, c.repeat, c.id in started) for c in cells], started, with_memory, cpu


@lacks_if(not sys.platform.startswith("linux"), "Linux: the local backend's tpd needs it")
@pytest.mark.parametrize("policy", ["none", "repeats", "workloads"])
def test_campaign_under_each_policy(engine, policy):
    local_server_or_skip("tpd")
    order, started, with_memory, cpu = _campaign(engine, policy)
    assert with_memory == started                         # memory rows only from fresh servers
    assert len(cpu) == 6                                  # server CPU is per phase: every cell has it
    if policy == "none":
        assert len(started) == 6
    elif policy == "repeats":                             # each group's repeats back to back on one server
        assert order == [("retr", 0, True), ("retr", 1, False), ("retr", 2, False),
                         ("login", 0, True), ("login", 1, False), ("login", 2, False)]
    else:                                                 # one server per repeat, its workloads in a row
        assert order == [("retr", 0, True), ("login", 0, False), ("retr", 1, True), ("login", 1, False),
                         ("retr", 2, True), ("login", 2, False)]


@lacks_if(not sys.platform.startswith("linux"), "Linux: the local backend's tpd needs it")
def test_build_and_environment_records_once_per_server_start(engine):
    """Six cells of tpd on two server starts (server_reuse: repeats): the store is asked
    for the build and environment rows at most once per server start (the statements
    that touch their tables, counted on the engine), and every cell still points at them."""
    from sqlalchemy import event

    local_server_or_skip("tpd")
    seen: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):
        if re.search(r"\b(FROM|INTO)\s+(server_build|environment)\b", statement, re.IGNORECASE):
            seen.append(statement.split()[0].upper())

    event.listen(engine, "before_cursor_execute", count)
    try:
        order, started, _, _ = _campaign(engine, "repeats")
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(order) == 6 and len(started) == 2
    # one get-or-create per table (a SELECT, an INSERT when new) for the first server start;
    # the second start has the same build and environment: no statement at all
    assert 2 <= len(seen) <= 2 * 2 * len(started), seen
    assert seen.count("SELECT") <= 2 * len(started), seen
    with Session(engine) as s:
        cid = s.scalar(select(Campaign.id).order_by(Campaign.id.desc()).limit(1))
        refs = set(s.execute(select(Cell.build_id, Cell.environment_id).where(Cell.campaign_id == cid)).all())
    assert len(refs) == 1 and None not in next(iter(refs)), refs


@lacks_if(not sys.platform.startswith("linux"), "Linux: the local backend's tpd needs it")
@pytest.mark.parametrize("policy", ["repeats", "workloads"])
def test_kept_sessions_across_a_server_life(engine, policy):
    """The idle and concurrent rows keep their sessions across the cells of one tpd life
    (runner.load.ftp.session_pool): the first cell of a life logs them in, the others reuse
    them (under ``workloads`` the concurrent RETR reuses the idle row's sessions, and they
    are ended before the QUIT row, which logs in its own); the
    memory rows of the cell that starts the server have no ``end`` checkpoint (taken after
    the sessions end, which they no longer do there), and every cell says what it reused."""
    local_server_or_skip("tpd")
    cid = _run(engine, "kept", policy, ["stor_idle", "retr_concurrent"] + (["quit"] if policy == "workloads" else []))
    with Session(engine) as s:
        cells = list(s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.started_at)))

        def stats(c: Cell, metric: str) -> dict[str, float]:
            return {r.stat: r.value for r in s.scalars(select(Sample).where(Sample.cell_id == c.id,
                                                                             Sample.metric == metric))}
        kept = [(c.workload, c.repeat, stats(c, "kept_sessions")) for c in cells]
        fresh = [bool(stats(c, "cell_time").get("start")) for c in cells]
        mem = [stats(c, "server_mem_uss") for c in cells]
        sessions_stage = [stats(c, "cell_time").get("sessions") for c in cells]
    n = SMALL["clients"]
    first, again = {"reused": 0, "logged_in": n, "dropped": 0}, {"reused": n, "logged_in": 0, "dropped": 0}
    if policy == "repeats":
        assert kept == [("stor_idle", 0, first), ("stor_idle", 1, again), ("stor_idle", 2, again),
                        ("retr_concurrent", 0, first), ("retr_concurrent", 1, again),
                        ("retr_concurrent", 2, again)]
        assert all(x is not None for x in sessions_stage)
    else:
        assert kept == [(w, r, {} if w == "quit" else first if w == "stor_idle" else again)
                        for r in range(3) for w in ("stor_idle", "retr_concurrent", "quit")]
        assert all(x is not None for x in sessions_stage)  # the QUIT row's: ending the kept ones
    for is_fresh, m in zip(fresh, mem):
        if is_fresh:
            assert {"start", "loaded", "peak"} <= set(m) and "end" not in m, m
        else:
            assert m == {}
