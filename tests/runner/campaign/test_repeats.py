"""Adaptive repeats (runner.campaign.repeats): the stopping rule on synthetic samples, the spec's
``repeats: auto``, and a campaign in the store that queues more repeats for a noisy
group only."""
from __future__ import annotations

import random

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.campaign.repeats import add_repeat_if_needed, needs_more, relative_half_width
from runner.spec.model import SpecError, count_cells, expand, parse_spec
from runner.store import campaigns as crud
from runner.store.models import Campaign, Cell, Sample

RULE = dict(minimum=3, maximum=10, target=0.025)


def _run_until_steady(draw) -> list[float]:
    values: list[float] = []
    while needs_more(values, **RULE):
        values.append(draw())
    return values


def test_relative_half_width_by_hand():
    # mean 100, s = 1, n = 3: t(0.975, 2) = 4.3027 -> 4.3027 / sqrt(3) = 2.484%
    assert relative_half_width([99.0, 100.0, 101.0]) == pytest.approx(0.024841, abs=1e-5)
    assert relative_half_width([5.0, 5.0, 5.0]) == 0.0
    assert relative_half_width([7.0]) is None and relative_half_width([-1.0, 0.0, 1.0]) is None
    with pytest.raises(ValueError):
        relative_half_width([1.0, float("nan")])


def test_stops_at_three_on_tight_data_and_runs_to_the_maximum_on_noisy_data():
    rng = random.Random(7)
    tight = [len(_run_until_steady(lambda: rng.gauss(1000.0, 2.0))) for _ in range(200)]   # 0.2% noise
    noisy = [len(_run_until_steady(lambda: rng.gauss(1000.0, 150.0))) for _ in range(200)]  # 15% noise
    assert set(tight) == {3}
    # Three samples can agree by chance: over 5,000 groups with 15% noise, 0.42% stopped
    # before the maximum (measured with this rule; 5% noise: 16.5%, 2% noise: 99.3%).
    assert sum(n == 10 for n in noisy) >= 196, sorted(noisy)
    # in between, the rule stops early on some groups and late on others
    mid = [len(_run_until_steady(lambda: rng.gauss(1000.0, 20.0))) for _ in range(200)]
    assert 3 < sum(mid) / len(mid) < 10


def test_short_groups_and_the_maximum():
    assert needs_more([1.0, 1.0], **RULE)                    # below the minimum (a cell failed)
    assert not needs_more([1.0] * 3, **RULE)
    assert not needs_more([1.0, 2.0] * 5, **RULE)            # at the maximum, however noisy


def test_spec_repeats_auto():
    base = {"servers": [{"name": "tpd"}], "workloads": [{"name": "login"}, {"name": "retr"}]}
    spec = parse_spec({**base, "repeats": "auto"})
    assert (spec.repeats, spec.max_repeats, spec.target_ci) == (3, 10, 0.025)
    assert len(expand(spec)) == 3 * 2 and count_cells(spec) == 10 * 2   # made / most it can make
    assert parse_spec(spec.model_dump(mode="json")).max_repeats == 10    # stored spec round-trips
    assert parse_spec({**base, "repeats": "auto", "max_repeats": 4, "target_ci": 0.05}).max_repeats == 4
    with pytest.raises(SpecError, match="max_repeats"):
        parse_spec({**base, "repeats": 5, "max_repeats": 4})
    with pytest.raises(SpecError, match="repeats"):
        parse_spec({**base, "repeats": "often"})
    with pytest.raises(SpecError, match="10 repeats x 2 workloads"):
        parse_spec({**base, "repeats": "auto"}, maximum_cells=19)


def _finish(session: Session, cell: Cell, value: float, spec) -> Cell | None:
    made: list[Cell | None] = []
    crud.finish_cell(session, cell=cell, status="done",
                     samples=[Sample(metric="throughput", stat="value", value=value, unit="MiB/s")],
                     then=lambda s, c: made.append(add_repeat_if_needed(s, c, spec)))
    return made[0]


def test_campaign_queues_repeats_for_the_noisy_group_only(engine):
    spec = parse_spec({"name": "auto", "repeats": "auto", "servers": [{"name": "tpd"}, {"name": "vsftpd"}],
                       "workloads": [{"name": "retr"}]})
    steady = {"tpd": iter([1000.0, 1001.0, 999.0]),
              "vsftpd": iter([800.0, 1000.0, 600.0, 900.0, 700.0, 1000.0, 650.0, 950.0, 800.0, 720.0])}
    with Session(engine) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        cid = camp.id
        assert camp.cells_total == 6
        ran = 0
        while (cell := crud.claim_next_cell(s, campaign_id=cid)) is not None and ran < 50:
            ran += 1
            _finish(s, cell, next(steady[cell.server]), spec)
        camp = s.get(Campaign, cid)
        s.refresh(camp)
        reps = {srv: sorted(c.repeat for c in s.scalars(select(Cell).where(Cell.campaign_id == cid,
                                                                             Cell.server == srv)))
                for srv in ("tpd", "vsftpd")}
        assert reps["tpd"] == [0, 1, 2]                       # steady at 3: nothing added
        assert reps["vsftpd"] == list(range(10))              # noisy: up to the maximum
        assert camp.status == "done" and camp.cells_total == camp.cells_done == 13 and ran == 13
        seqs = [c.seq for c in s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.seq))]
        assert seqs == sorted(set(seqs))                      # added cells come after the others


def test_failed_cells_get_no_more_repeats_and_fixed_repeats_never_grow(engine):
    auto = parse_spec({"name": "a", "repeats": "auto", "servers": [{"name": "tpd"}], "workloads": [{"name": "retr"}]})
    fixed = parse_spec({"name": "f", "repeats": 2, "servers": [{"name": "tpd"}], "workloads": [{"name": "retr"}]})
    with Session(engine) as s:
        for spec in (auto, fixed):
            camp = crud.create_campaign(s, spec=spec, backend="local")
            s.commit()
            while (cell := crud.claim_next_cell(s, campaign_id=camp.id)) is not None:
                if spec is auto:
                    crud.finish_cell(s, cell=cell, status="failed", error="x",
                                     then=lambda ss, c: add_repeat_if_needed(ss, c, auto))
                else:
                    assert _finish(s, cell, 100.0 + 50 * cell.repeat, fixed) is None
            s.refresh(camp)
            assert camp.cells_total == len(expand(spec)) and camp.status in ("done", "failed")
