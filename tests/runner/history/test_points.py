"""History points kept at store time (runner.store.points, table ``series_point``) on a
real PostgreSQL: the same points and the same verdicts as a reference written apart
from the code (tests/runner/history/history_before.py: one SQL aggregation per request,
and plain re-computations of the runs, steps and tests), kept by finish_cell under concurrent
writers, filled by migration 0004, removed with their campaign."""
from __future__ import annotations

import random
import threading
from collections import defaultdict

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session

from runner.catalogue.workloads import WORKLOADS
from runner.history import SERIES_METRICS, Point, SeriesKey, list_series, load_points, series_changes, series_points
from runner.history.changes import _notable
from runner.spec.model import parse_spec
from runner.store import campaigns as crud
from runner.store.models import Cell, Sample, SeriesPoint
from runner.store.points import CPU_COST, CPU_COST_TREE, TREE_SUFFIX, refresh_points, track_expr
from tests.runner.history import history_before as before

SMALL = {"clients": 10, "file_size": "256K", "transfer_size": "4M", "duration": 0.2}


def _samples(cell: Cell, rnd: random.Random, level: float = 1.0) -> list[Sample]:
    """The rows a real cell stores that history reads, plus some it does not."""
    info = WORKLOADS[cell.workload]
    base = {"retr": 1000.0, "stor": 600.0, "login": 0.1}[cell.workload]
    out = [Sample(metric=info.primary, stat="value", value=base * level * rnd.gauss(1, 0.02), unit=info.unit),
           Sample(metric="errors", stat="total", value=0.0, unit="count"),
           Sample(metric="server_cpu", stat="user", value=0.3, unit="s")]
    for stat in ("start", "peak", "end"):
        out.append(Sample(metric="server_mem_uss", stat=stat, value=9e6 * level * rnd.gauss(1, 0.01), unit="bytes"))
        out.append(Sample(metric="server_mem_rss_minus_shared", stat=stat, value=8e6 * rnd.gauss(1, 0.01),
                          unit="bytes"))
    kind, unit = ("op", "us/op") if cell.workload == "login" else ("gib", "s/GiB")
    out.append(Sample(metric=f"server_cpu_per_{kind}", stat="value", value=0.3 * level * rnd.gauss(1, 0.02),
                      unit=unit))
    out.append(Sample(metric=f"client_cpu_per_{kind}", stat="value", value=0.5, unit=unit))
    return out


def _campaign(engine, servers: list[dict], outcome, *, workloads=("retr", "login"), repeats: int = 3,
              name: str = "c") -> int:
    """Create a campaign and finish its cells through crud.finish_cell as
    ``outcome(cell, rnd) -> (status, samples, env_class)`` says (status None: leave the
    cell queued; "running": claim it and leave it running). Returns the campaign id."""
    spec = parse_spec({"name": name, "repeats": repeats, "servers": servers, "backend": "local",
                       "workloads": [{"name": w, "params": SMALL} for w in workloads]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        rnd = random.Random(camp.id)
        for c in s.scalars(select(Cell).where(Cell.campaign_id == camp.id).order_by(Cell.seq)).all():
            status, samples, env_class = outcome(c, rnd)
            if status is None:
                continue
            c.status, c.started_at = "running", crud.now()
            s.commit()
            if status == "running":
                continue
            env = crud.get_or_create_environment(s, data={"kernel": env_class}, env_class=env_class) \
                if env_class else None
            crud.finish_cell(s, cell=c, status=status, samples=samples, environment=env)
        return camp.id


def _done(env_class="envA", level=1.0):
    return lambda c, rnd: ("done", _samples(c, rnd, level), env_class)


DEV = {"name": "pyftpdlib", "version": "2.2.0", "label": "dev"}
PLAIN = {"name": "pyftpdlib", "version": "2.2.0"}


def _store_mixed(engine) -> dict[str, int]:
    """Campaigns with what history must get right: failed cells carrying samples (left
    out), a skipped cell, queued and running cells, a point whose cells ran in two
    environments, two versions of one track in one campaign, labelled and variant tracks."""
    ids = {}

    def c1(c, rnd):
        if c.server == "tpd" and c.workload == "retr" and c.repeat == 1:
            return "failed", _samples(c, rnd, level=5.0), "envA"  # figures of a failed cell: never a point
        if c.server == "tpd" and c.workload == "login" and c.repeat == 2:
            return "skipped", [], None
        return "done", _samples(c, rnd), "envA"

    ids["c1"] = _campaign(engine, [DEV, PLAIN, {"name": "tpd"}], c1)
    ids["c2"] = _campaign(engine, [{**PLAIN, "version": "1.5.10"}, PLAIN,
                                   {**PLAIN, "variant": {"use_sendfile": False}}],
                          lambda c, rnd: ("done", _samples(c, rnd, 1.3), "envA" if c.repeat == 0 else "envB"))
    ids["c3"] = _campaign(engine, [DEV, {"name": "tpd"}], _done("envB", 0.7))  # deleted below
    ids["c4"] = _campaign(engine, [DEV, {"name": "tpd"}],
                          lambda c, rnd: ((None, [], None) if c.repeat == 2 else ("running", [], None))
                          if c.server == "tpd" else ("done", _samples(c, rnd), "envB"))
    ids["c5"] = _campaign(engine, [DEV], _done("envB", 1.0), workloads=("retr", "login", "stor"))
    return ids


def _cost_oracle(session: Session) -> dict[SeriesKey, list[tuple[int, str, list[float]]]]:
    """CPU cost points computed in Python from the ORM rows: ``(campaign, version, values
    in run order)`` per series, done cells only."""
    tracks = dict(session.execute(select(Cell.id, track_expr())).all())
    acc: dict[SeriesKey, dict[tuple[int, str], list[tuple[int, int, float]]]] = defaultdict(lambda: defaultdict(list))
    for c in session.scalars(select(Cell).where(Cell.status == "done")).all():
        for smp in c.samples:
            if smp.metric in CPU_COST and smp.stat == "value":
                key = SeriesKey(c.server, tracks[c.id], c.workload, c.params_key, smp.metric)
                acc[key][(c.campaign_id, c.server_version)].append((c.seq, smp.id, smp.value))
    return {key: sorted((cid, ver, [v for *_, v in sorted(vals)]) for (cid, ver), vals in pts.items())
            for key, pts in acc.items()}


def _check_against_before(session: Session) -> None:
    old = before.all_points(session)
    new = load_points(session)
    assert old, "nothing to compare"
    assert {k: v for k, v in new.items() if k.metric in before.OLD_METRICS} == old
    for window in (2, 3):
        assert {k: v for k, v in load_points(session, window=window).items()
                if k.metric in before.OLD_METRICS} == before.all_points(session, window=window)
    cost = {k: [(p.campaign_id, p.version, p.samples) for p in v] for k, v in new.items() if k.metric in CPU_COST}
    assert cost == _cost_oracle(session) and cost
    listed = {SeriesKey(d["server"], d["track"], d["workload"], d["params_key"], d["metric"]): d
              for d in list_series(session)}
    assert set(listed) == set(new)
    for key, pts in new.items():
        assert series_points(session, key=key) == pts
        assert listed[key]["points"] == len(pts) and listed[key]["last_campaign"] == pts[-1].campaign_id


def test_stored_points_equal_the_old_aggregation(engine):
    ids = _store_mixed(engine)
    with Session(engine) as s:
        _check_against_before(s)
        pts = load_points(s)
        plain = next(v for k, v in pts.items() if (k.track, k.workload, k.metric) == ("{}", "retr", ""))
        # c2 ran two versions of the track: two points, in the order they ran
        assert [(p.campaign_id, p.version) for p in plain] == [
            (ids["c1"], "2.2.0"), (ids["c2"], "1.5.10"), (ids["c2"], "2.2.0")]
        assert plain[1].env_class == "envB"  # cells in envA and envB: the largest class, as before
        dev = next(v for k, v in pts.items() if (k.track, k.workload, k.metric) == ("dev", "login", ""))
        assert [p.campaign_id for p in dev] == [ids[c] for c in ("c1", "c3", "c4", "c5")]
        assert any(k.track == '{"use_sendfile": false}' for k in pts)
        tpd = next(v for k, v in pts.items() if (k.server, k.workload, k.metric) == ("tpd", "retr", ""))
        assert [len(p.samples) for p in tpd] == [2, 3]  # c1: the failed repeat left out; c4: nothing done
        mem = next(v for k, v in pts.items() if k.metric == "server_mem_uss")
        assert mem[0].unit == "MiB" and 8 < mem[0].samples[0] < 9.2  # peak, bytes -> MiB
        s.execute(text("DELETE FROM campaign WHERE id = :c"), {"c": ids["c3"]})
        s.commit()
        assert not s.scalar(select(SeriesPoint.id).where(SeriesPoint.campaign_id == ids["c3"]).limit(1))
        _check_against_before(s)


def _points_of(n: int, rnd: random.Random, *, step_at: int | None = None, env_at: int | None = None) -> list[Point]:
    out = []
    for i in range(n):
        level = 1.0 if step_at is None or i < step_at else 1.25
        out.append(Point(i + 1, f"c{i + 1}", None, "1", "x", "B" if env_at is not None and i >= env_at else "A",
                         "MiB/s", [1000 * level * rnd.gauss(1, 0.02) for _ in range(5)]))
    return out


def test_the_reference_on_hand_worked_series():
    """The reference itself on series worked out on paper. Flat: no step (one segment costs
    0 and every other segment only adds beta). Four points at 10 then four at 20: one
    segment costs S_1 = 8 x 5 = 40 (median 15), objective beta + ln(0.015 + 40/8) = 2.65
    with beta = 4 ln 8 / 8 = 1.04; two segments cost 0, objective 2 beta + ln(0.015) =
    -2.12: the step at index 4. Three against three wholly separated samples: exact
    two-sided p = 2 / C(6, 3) = 0.1."""
    assert before._steps((10.0,) * 8) == ()
    assert before._steps((10.0,) * 4 + (20.0,) * 4) == (4,)
    assert before._steps((10.0,) * 5 + (20.0,) * 5 + (10.0,) * 5) == (5, 10)
    assert before._mann_whitney_p([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]) == pytest.approx(0.1)
    assert before._worse_by(100.0, 80.0, True) == pytest.approx(0.25)  # throughput down: worse
    assert before._worse_by(1.0, 1.25, False) == pytest.approx(0.25)  # time up: worse
    pts = _points_of(6, random.Random(1), env_at=4)
    assert before._env_runs(pts) == [(0, 4), (4, 6)]


def test_verdicts_equal_the_old_code():
    """The verdicts of every series at once (step detection batched, changes made only
    where one can be reported) equal the old code's, series by series and all together."""
    rnd = random.Random(7)
    series = {}
    for i in range(40):
        n = rnd.choice([1, 2, 3, 5, 8, 20, 50])
        step = rnd.choice([None, n // 2, n - 1]) if n > 2 else None
        env = rnd.choice([None, None, n // 3]) if n > 3 else None
        series[SeriesKey("s", f"t{i}", rnd.choice(["retr", "login"]), "p", rnd.choice(SERIES_METRICS))] = \
            _points_of(n, rnd, step_at=step, env_at=env)
    def order(d):
        return d["after"]["campaign_id"], d["kind"], d["series"]["track"], d["series"]["metric"]

    kinds = []
    for min_effect, alpha in ((0.05, 0.05), (0.0, 0.2), (0.3, 0.05)):
        got = [c.as_dict() for c in _notable(series, alpha, min_effect, True, True)]
        want = [c.as_dict() for c in before.find_regressions(series, alpha=alpha, min_effect=min_effect)]
        assert sorted(got, key=order) == sorted(want, key=order)
        kinds.append({d["kind"] for d in got})
    assert kinds[0] == {"regression", "improvement", "env_changed"} and kinds[2] == {"env_changed"}
    for key, pts in series.items():
        changes, tests = before.series_verdicts(key, pts, 0.05)
        before.decide([changes], [tests], 0.05)
        assert [c.as_dict() for c in series_changes(key, pts)] == [c.as_dict() for c in changes]


def test_points_follow_each_finished_cell(engine):
    """finish_cell writes the point in its own transaction: one more value per done
    cell of the group, none for a failed one."""
    seen = []

    def outcome(c, rnd):
        return ("failed" if c.repeat == 1 else "done"), _samples(c, rnd), "envA"

    cid = _campaign(engine, [DEV], lambda c, rnd: (None, [], None), workloads=("retr",), repeats=3)
    with Session(engine, expire_on_commit=False) as s:
        rnd = random.Random(1)
        for c in s.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.seq)).all():
            status, samples, _ = outcome(c, rnd)
            crud.finish_cell(s, cell=c, status=status, samples=samples)
            seen.append(s.scalars(select(SeriesPoint.samples).where(SeriesPoint.campaign_id == cid,
                                                                    SeriesPoint.metric == "")).all())
    assert [[len(x) for x in pts] for pts in seen] == [[1], [1], [2]]


def test_concurrent_finishes_of_one_group_lose_nothing(engine):
    """Worker A has refreshed the group's points and not committed; worker B finishes
    another cell of the group meanwhile. B waits for A (the campaign's row lock) and
    then sees A's samples: the point holds both. Were the points computed before the
    lock, B's point would miss A's cell."""
    cid = _campaign(engine, [DEV], lambda c, rnd: (None, [], None), workloads=("retr",), repeats=2)
    with Session(engine, expire_on_commit=False) as sa, Session(engine, expire_on_commit=False) as sb:
        cell_a, cell_b = sa.scalars(select(Cell).where(Cell.campaign_id == cid).order_by(Cell.seq)).all()
        cell_b = sb.get(Cell, cell_b.id)
        cell_a.status = "done"
        sa.add(Sample(cell_id=cell_a.id, metric="throughput", stat="value", value=111.0, unit="MiB/s"))
        sa.flush()
        assert refresh_points(sa, cell=cell_a) == 1  # holds the campaign's row lock until commit
        errors: list[BaseException] = []

        def finish_b():
            try:
                crud.finish_cell(sb, cell=cell_b, status="done",
                                 samples=[Sample(metric="throughput", stat="value", value=222.0, unit="MiB/s")])
            except BaseException as exc:  # reported below
                errors.append(exc)

        th = threading.Thread(target=finish_b)
        th.start()
        th.join(1.0)
        assert th.is_alive(), "B did not wait for A's lock"
        sa.commit()
        th.join(20)
        assert not th.is_alive() and not errors, errors
    with Session(engine) as s:
        assert s.scalars(select(SeriesPoint.samples).where(SeriesPoint.campaign_id == cid,
                                                            SeriesPoint.metric == "")).all() == [[111.0, 222.0]]


def _point_rows(engine) -> list[tuple]:
    with engine.connect() as c:
        return [tuple(r) for r in c.execute(text(
            "SELECT campaign_id, server, track, workload, params_key, metric, version, seq, label, env_class, samples "
            "FROM series_point ORDER BY campaign_id, server, track, workload, params_key, metric, version"))]


def test_migration_backfill_and_rebuild_give_the_stored_points(engine):
    """Migration 0004 (downgraded, then upgraded over the stored samples) recomputes
    exactly what finish_cell stored; migration 0005 then marks the cells with server CPU
    rows as process-tree cells and moves their CPU cost points to the ``_tree`` series,
    which is what rebuild_points computes from the marked cells."""
    from alembic import command
    from alembic.config import Config

    from runner.config import get_settings
    from runner.store.points import rebuild_points

    _store_mixed(engine)
    kept = _point_rows(engine)
    assert len(kept) > 20
    cfg = Config()
    cfg.set_main_option("script_location", str(get_settings().migrations_dir))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
        assert conn.scalar(text("SELECT to_regclass('series_point')")) is None
        command.upgrade(cfg, "0004")
    assert _point_rows(engine) == kept
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")  # 0005: every cell with server CPU rows is a process-tree cell
    moved = sorted((*r[:5], r[5] + TREE_SUFFIX if r[5] in CPU_COST else r[5], *r[6:]) for r in kept)
    assert sum(r[5] in CPU_COST_TREE for r in moved) > 5
    assert sorted(_point_rows(engine)) == moved
    with Session(engine) as s:
        cells = s.scalars(select(Cell)).all()
        assert {c.server_cpu_source for c in cells if any(x.metric == "server_cpu" for x in c.samples)} == {"tree"}
        assert {c.server_cpu_source for c in cells if not c.samples} == {None}
        assert rebuild_points(s) == len(kept)
        s.commit()
    assert sorted(_point_rows(engine)) == moved


def test_model_matches_migration(engine):
    """The SeriesPoint model and migration 0004, ``cell.server_cpu_source`` and migration
    0005, describe the same schema (Alembic's autogenerate comparison finds nothing to
    change)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from runner.store.models import Base

    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    mine = [d for d in diff if "series_point" in repr(d) or "server_cpu_source" in repr(d)]
    assert mine == []


def test_bad_input_is_refused_and_nothing_changes(engine):
    _campaign(engine, [DEV], _done(), workloads=("retr",), repeats=2)
    kept = _point_rows(engine)
    with Session(engine) as s:
        with pytest.raises(ValueError, match="unknown series metric"):
            load_points(s, metrics=("server_cpu",))
        with pytest.raises(ValueError, match="server_cpu_per_gib"):
            SeriesKey("pyftpdlib", "dev", "retr", "p", "cpu")
        ghost = Cell(id=10**9, campaign_id=1)
        with pytest.raises(LookupError, match="not stored"):
            refresh_points(s, cell=ghost)
        s.rollback()
    assert _point_rows(engine) == kept


def test_cgroup_and_tree_cells_feed_separate_cost_series(engine):
    """A cell whose server CPU came from its cgroup feeds the plain CPU cost series, a
    process-tree cell the ``_tree`` one: a history never compares the two."""
    def outcome(c, rnd):
        return "done", _samples(c, rnd), "envA"

    cid = _campaign(engine, [DEV, {"name": "tpd"}], outcome, workloads=("retr",), repeats=2)
    with Session(engine) as s:
        for c in s.scalars(select(Cell).where(Cell.campaign_id == cid)).all():
            c.server_cpu_source = "tree" if c.server == "tpd" else "cgroup"
            refresh_points(s, cell=c)
        s.commit()
        points = load_points(s)
    cost = {(k.server, k.metric) for k in points if k.metric in CPU_COST + CPU_COST_TREE}
    assert cost == {("pyftpdlib", "server_cpu_per_gib"), ("tpd", "server_cpu_per_gib_tree")}
    tree_key = next(k for k in points if k.metric == "server_cpu_per_gib_tree")
    assert tree_key.benchmark == "RETR (server -> client), server CPU per GiB (process tree)"
    assert len(points[tree_key][0].samples) == 2
