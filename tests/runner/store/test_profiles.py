"""A server profile stored with its cell: a real ``perf record`` of a busy C program
(tests/support/real_profile.py) goes through a CellOutcome and the campaign loop's store
step into ``cell_profile``, comes back equal, shows in the JSON export and the report's
profiles table, and goes when its cell goes."""
from __future__ import annotations

import json

import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from tests.support.real_profile import FRAMES, record, store_profiled_campaign


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """Two real profiles, (profile, the program's own write count) each: mode ``a``
    (hash-heavy) and ``b`` (copy-heavy)."""
    d = tmp_path_factory.mktemp("perf")
    return {"a": record(d, "a"), "b": record(d, "b")}


def _share(folded: str, frame: str) -> float:
    """Share of the samples whose stack holds ``frame``."""
    total = hit = 0
    for line in folded.splitlines():
        stack, _, n = line.rpartition(" ")
        total += int(n)
        hit += int(n) if frame in stack.split(";") else 0
    return hit / total


def test_real_profile_is_what_the_program_did(profiles):
    """The profile itself is real: the program's frames by name, kernel frames under its
    write(2), a hash share that follows the mode's 4:1 ratio, and the tracepoint's write
    count equal to the program's own (plus its closing printf)."""
    for p, writes, cpu_s in profiles.values():
        assert all(f in p.on_cpu for f in FRAMES), p.on_cpu[:500]
        assert "_[k]" in p.on_cpu  # inferno-collapse-perf's kernel-frame annotation (--all)
        # its block writes, plus the one write(2) of its closing printf to stdout
        assert p.syscalls[0].name == "write" and p.syscalls[0].count == writes + 1 and writes > 0
        # the samples stand for the program's own CPU time (perf's children, perf stat, are
        # in the samples too but spend next to nothing): within 20% + 3 samples of it
        assert cpu_s > 0.05 and abs(p.on_cpu_s - cpu_s) <= 0.2 * cpu_s + 3 / p.rate_hz, (p.on_cpu_s, cpu_s)
    hash_a, hash_b = _share(profiles["a"][0].on_cpu, "xfl_hash_block"), _share(profiles["b"][0].on_cpu,
                                                                               "xfl_hash_block")
    assert hash_a > 0.3 and hash_b < hash_a, (hash_a, hash_b)
    copy_a, copy_b = _share(profiles["a"][0].on_cpu, "xfl_copy_block"), _share(profiles["b"][0].on_cpu,
                                                                               "xfl_copy_block")
    assert copy_b > 0.5 and copy_a < copy_b, (copy_a, copy_b)


def test_profile_round_trip_and_cascade(engine, profiles):
    """Stored through the loop's store step, the row gives back the same ServerProfile;
    an unprofiled cell has none; deleting the cell deletes its profile."""
    from runner.cell.profile_rows import server_profile
    from runner.store.models import Cell, CellProfile
    from runner.store.profiles import campaign_profiles, load_profile, profiled_cell_ids

    pa, pb = profiles["a"][0], profiles["b"][0]
    cid, ids = store_profiled_campaign(engine, {"hash-heavy": pa, "copy-heavy": pb, "plain": None})
    with Session(engine) as s:
        assert server_profile(load_profile(s, cell_id=ids["hash-heavy"])) == pa
        assert server_profile(load_profile(s, cell_id=ids["copy-heavy"])) == pb
        assert load_profile(s, cell_id=ids["plain"]) is None
        assert profiled_cell_ids(s, campaign_id=cid) == [ids["hash-heavy"], ids["copy-heavy"]]
        assert [c.server_label for c, _ in campaign_profiles(s, campaign_id=cid)] == ["hash-heavy", "copy-heavy"]
        size = len(pa.on_cpu.encode())
        print(f"folded on-CPU text of {pa.on_cpu_s:.2f} CPU s at {pa.rate_hz} Hz: {size} bytes, "
              f"{len(pa.on_cpu.splitlines())} stacks")
        assert 0 < size < 1 << 20
        s.execute(delete(Cell).where(Cell.id == ids["hash-heavy"]))
        s.commit()
        assert s.scalar(select(CellProfile.cell_id).where(CellProfile.cell_id == ids["hash-heavy"])) is None
        assert load_profile(s, cell_id=ids["copy-heavy"]) is not None


def test_bad_profile_field_is_named(profiles):
    """A profile with a bad field is refused naming it, before anything is stored."""
    from dataclasses import replace

    from runner.cell.profile_rows import profile_row
    from runner.metrics.profile_data import SyscallRow

    p = profiles["a"][0]
    with pytest.raises(ValueError, match="profile.rate_hz"):
        profile_row(replace(p, rate_hz=0))
    with pytest.raises(ValueError, match=r"syscalls\[0\].count"):
        profile_row(replace(p, syscalls=(SyscallRow("write", -1),)))


def test_json_export_and_report_carry_the_profile(engine, profiles):
    """The JSON export holds each profiled cell's folded stacks, syscall table, profiler,
    version and rate, and loads back equal; the text report's profiles table names the
    profiler, its version and the rate."""
    from runner.report import render as reporting
    from runner.report.json import load_json
    from runner.report.reader import load_campaign

    pa, pb = profiles["a"][0], profiles["b"][0]
    cid, ids = store_profiled_campaign(engine, {"hash-heavy": pa, "copy-heavy": pb})
    with Session(engine) as s:
        data = load_campaign(s, campaign_id=cid)
    text = reporting.campaign_report(data, fmt="json")
    doc = json.loads(text)
    got = {p["server"]: p for p in doc["profiles"]}
    assert got["hash-heavy"]["on_cpu"] == pa.on_cpu and got["copy-heavy"]["on_cpu"] == pb.on_cpu
    assert got["hash-heavy"]["cell_id"] == ids["hash-heavy"]
    assert got["hash-heavy"]["profiler"] == "perf" and got["hash-heavy"]["rate_hz"] == pa.rate_hz
    assert got["hash-heavy"]["profiler_version"] == pa.profiler_version
    assert got["hash-heavy"]["syscalls"] == [{"name": "write", "count": pa.syscalls[0].count, "total_s": None,
                                              "errors": None}]
    assert load_json(text) == data
    report = reporting.campaign_report(data, fmt="text")
    assert "Server CPU profiles" in report
    assert f"perf {pa.profiler_version}" in report and f"{pa.rate_hz} Hz" in report
    assert f"write {pa.syscalls[0].count}" in report


def test_migration_down_and_up(empty_db_url):
    """Revision 0006 makes ``cell_profile`` (cell_id primary key and foreign key with ON
    DELETE CASCADE) and its downgrade drops it."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import inspect

    from runner.config import get_settings
    from runner.store.db import get_engine

    engine = get_engine(url=empty_db_url)
    fks = inspect(engine).get_foreign_keys("cell_profile")
    assert [(f["constrained_columns"], f["referred_table"], f["options"].get("ondelete")) for f in fks] == [
        (["cell_id"], "cell", "CASCADE")]
    assert inspect(engine).get_pk_constraint("cell_profile")["constrained_columns"] == ["cell_id"]
    cfg = Config()
    cfg.set_main_option("script_location", str(get_settings().migrations_dir))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
    assert "cell_profile" not in inspect(engine).get_table_names()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    assert "cell_profile" in inspect(engine).get_table_names()


def test_profile_notes_are_scrubbed_of_secrets(profiles):
    """A note naming the spec's password (a server's command line, say) is stored
    redacted; the stacks are kept as measured."""
    from dataclasses import replace

    from runner.campaign.loop import scrubbed_outcome
    from runner.cell.outcome import CellOutcome

    p = replace(profiles["a"][0], notes=("server argv: ftpd --password hunter2-secret",))
    out = scrubbed_outcome(CellOutcome("done", profile=p), frozenset({"hunter2-secret"}))
    assert out.profile is not None and "hunter2-secret" not in out.profile.notes[0]
    assert out.profile.on_cpu == p.on_cpu


def test_the_profiled_repeat_stays_out_of_the_primary_figures(engine, profiles):
    """A spec with ``profile:`` adds one profiled cell per family (runner.spec.model.expand);
    stored through the loop's store step, its figure is in no series, history point or
    adaptive-repeat count, while its profile is in the report."""
    from runner.campaign.loop import _store
    from runner.cell.outcome import CellOutcome
    from runner.report.reader import load_campaign
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, Sample, SeriesPoint
    from tests.support.real_profile import TEST_ENVIRONMENT

    spec = parse_spec({"name": "profiled repeat", "repeats": 2, "backend": "local", "profile": True,
                       "servers": [{"name": "pyftpdlib", "version": "2.2.0"}],
                       "workloads": [{"name": "login", "params": {"clients": 4}}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        cells = s.query(Cell).filter(Cell.campaign_id == camp.id).order_by(Cell.seq).all()
        assert [(c.repeat, c.profiled) for c in cells] == [(0, False), (1, False), (2, True)]
        for c, value in zip(cells, (1.0, 1.5, 9.0)):
            c.status, c.started_at = "running", crud.now()
            s.commit()
            outcome = CellOutcome("done", samples=[Sample(metric="elapsed", stat="value", value=value, unit="s")],
                                  summary="test", environment=dict(TEST_ENVIRONMENT),
                                  profile=profiles["a"][0] if c.profiled else None)
            _store(s, c, outcome, spec, None, {}, crud.RecordCache())  # type: ignore[arg-type]  # environment given
        data = load_campaign(s, campaign_id=camp.id)
        elapsed = [x for x in data.series if x.metric == "elapsed"]
        assert [x.samples for x in elapsed] == [(1.0, 1.5)]
        assert [(p.repeat, p.profiler) for p in data.profiles] == [(2, "perf")]
        points = s.scalars(select(SeriesPoint).where(SeriesPoint.campaign_id == camp.id,
                                                     SeriesPoint.metric == "")).all()
        assert [list(p.samples) for p in points] == [[1.0, 1.5]]
