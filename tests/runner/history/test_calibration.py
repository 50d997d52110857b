"""``xferlab calibrate`` on real A/A campaigns of tpd RETR (local backend, 1 s phases): the stored
noise floor against the campaigns' samples read back independently, its bounds, the
false-alarm count against the pairs tested, and min_effect_for with and without a
calibration."""
from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

XFERLAB = [sys.executable, "-m", "runner.cli"]


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_calibrate_tpd_retr_reports_a_sane_noise_floor(xferlab_env, engine):
    p = subprocess.run(XFERLAB + ["calibrate", "--server", "tpd", "--workload", "retr", "-n", "3", "--repeats", "5",
                                  "--transfer-size", "64M", "--duration", "1", "--backend", "local", "--json"],
                       env=xferlab_env, capture_output=True, text=True, timeout=540)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = json.loads(p.stdout[p.stdout.index("\n[") + 1:])
    print("series calibrated:", [(x["series"]["metric"], x["samples_per_run"], round(x["noise_floor"], 4))
                                 for x in out])
    primary = [r for r in out if r["series"]["metric"] == "" and r["series"]["server"] == "tpd"]
    assert len(primary) == 1, out
    r = primary[0]
    print("calibration:", {k: r[k] for k in ("medians", "noise_floor", "cv", "false_alarms", "pairs", "env_class")})
    assert r["figure"] == "throughput" and r["unit"] == "MiB/s" and len(r["campaigns"]) == 3
    # independent reference: each campaign's median of its RETR throughput samples, read from `sample`
    with engine.connect() as c:
        rows = c.execute(text(
            "SELECT c.campaign_id, s.value FROM sample s JOIN cell c ON c.id = s.cell_id "
            "WHERE c.status = 'done' AND c.workload = 'retr' AND s.metric = 'throughput' AND s.stat = 'value' "
            "AND c.campaign_id = ANY(:ids)"), {"ids": r["campaigns"]}).all()
    by_campaign: dict[int, list[float]] = {}
    for cid, v in rows:
        by_campaign.setdefault(cid, []).append(v)
    medians = [statistics.median(by_campaign[cid]) for cid in r["campaigns"]]
    assert all(len(by_campaign[cid]) == 5 for cid in r["campaigns"])
    assert r["medians"] == pytest.approx(medians, rel=1e-12)
    assert 50 < min(medians) and max(medians) < 20000  # MiB/s of tpd's sendfile RETR over loopback
    floor = (max(medians) - min(medians)) / statistics.median(medians)
    assert r["noise_floor"] == pytest.approx(floor, rel=1e-9)
    assert 0.001 <= r["noise_floor"] <= 0.5, r
    assert r["pairs"] == 3 and 0 <= r["false_alarms"] <= 3
    assert r["false_alarm_rate"] == pytest.approx(r["false_alarms"] / 3)
    assert r["alpha"] == 0.05 and r["min_effect"] == 0.05

    from runner.history.calibration import DEFAULT_MIN_EFFECT, MIN_CALIBRATED_EFFECT, min_effect_for
    from runner.store.models import NoiseCalibration

    with Session(engine) as s:
        stored = s.query(NoiseCalibration).filter(NoiseCalibration.figure == "throughput").one()
        assert stored.campaign_ids == r["campaigns"] and stored.env_class == r["env_class"]
        assert [statistics.median(x) for x in stored.runs_samples] == pytest.approx(medians)
        assert min_effect_for("throughput", r["env_class"], s) == pytest.approx(max(MIN_CALIBRATED_EFFECT, floor))
        assert min_effect_for("throughput", "other-class", s) == DEFAULT_MIN_EFFECT == 0.05
        assert min_effect_for("elapsed", r["env_class"], s) == DEFAULT_MIN_EFFECT
    from runner.campaign import gate  # what `xferlab check` and `xferlab bisect` use without --min-effect

    assert gate.min_effect_for("throughput", r["env_class"], 0.05, engine=engine) == pytest.approx(
        max(MIN_CALIBRATED_EFFECT, floor))
    assert gate.min_effect_for("elapsed", r["env_class"], 0.07, engine=engine) == 0.07   # uncalibrated: the default
    assert gate.min_effect_for("throughput", r["env_class"], 0.07) == 0.07               # --min-effect given
    listed = subprocess.run(XFERLAB + ["calibrate", "--list"], env=xferlab_env, capture_output=True, text=True,
                            timeout=120)
    assert listed.returncode == 0, listed.stderr
    print(listed.stdout)
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("  tpd: RETR"))
    assert f"noise floor {floor * 100:.2f}%" in line and f"env {r['env_class']}:" in line
    assert f"false alarms {r['false_alarms']}/3 pairs" in line
    assert ", ".join(f"{m:.4g}" for m in medians) + " MiB/s" in line


@pytest.mark.parallel  # refused input, the schema, arithmetic: no time measured
def test_calibrate_refuses_bad_input(xferlab_env):
    for argv, msg in ((["--server", "tpd", "--workload", "retr", "-n", "1"], "-n/--runs must be 2 to 20"),
                      (["--server", "tpd", "--workload", "retr", "-n", "21"], "-n/--runs must be 2 to 20"),
                      (["--server", "tpd"], "both --server and --workload"),
                      (["--server", "tpd,pyftpdlib", "--workload", "retr"], "one server"),
                      (["--server", "tpd", "--workload", "retr", "--repeats", "1"], "--repeats must be at least 2")):
        p = subprocess.run(XFERLAB + ["calibrate", *argv], env=xferlab_env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 2 and msg in p.stderr, (argv, p.stderr)


@pytest.mark.parallel  # refused input, the schema, arithmetic: no time measured
def test_model_matches_migration(engine):
    """The NoiseCalibration model and its migration describe the same schema (Alembic's
    autogenerate comparison finds nothing to change)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from runner.store.models import Base

    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert [d for d in diff if "noise_calibration" in repr(d)] == []


@pytest.mark.parallel  # refused input, the schema, arithmetic: no time measured
def test_analyse_by_hand():
    """Noise floor, cv and pair false alarms of three hand-made runs: 100, 104, 110 (medians);
    the third run is 10% above the first with its samples wholly apart (4 vs 4: p = 0.029)."""
    from runner.history.calibration import analyse
    from runner.history.series import Point, SeriesKey

    key = SeriesKey("tpd", "{}", "retr", "k")
    runs = [[99, 100, 100.5, 101], [103, 104, 104, 105], [109, 110, 110, 111]]
    pts = [Point(i, "c", None, "1", "l", "e", "MiB/s", r) for i, r in enumerate(runs)]
    r = analyse(key, pts)
    assert r.medians == [100.25, 104, 110]
    assert r.noise_floor == pytest.approx((110 - 100.25) / 104)
    assert r.cv == pytest.approx(statistics.stdev([100.25, 104, 110]) / statistics.fmean([100.25, 104, 110]))
    # pairs: (0,1) 3.6% < 5%: not tested; (1,2) 5.5%, p = 0.029: flagged; (0,2) 9.0%, p = 0.029: flagged
    assert (r.false_alarms, r.pairs) == (2, 3)
    assert analyse(key, pts, min_effect=0.06).false_alarms == 1
    assert analyse(key, pts, alpha=0.01).false_alarms == 0
    with pytest.raises(ValueError, match="at least 2"):
        analyse(key, pts[:1])
    with pytest.raises(ValueError, match="different versions"):
        analyse(key, [pts[0], Point(9, "c", None, "2", "l", "e", "MiB/s", runs[1])])


@pytest.mark.parallel  # refused input, the schema, arithmetic: no time measured
def test_migration_down_and_up(empty_db_url):
    """The noise_calibration revision's downgrade drops the table and its upgrade makes it again."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import inspect

    from runner.config import get_settings
    from runner.store.db import get_engine

    engine = get_engine(url=empty_db_url)
    assert "noise_calibration" in inspect(engine).get_table_names()
    cfg = Config()
    cfg.set_main_option("script_location", str(get_settings().migrations_dir))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0007")  # the revision before noise_calibration (0008)
    names = inspect(engine).get_table_names()
    assert "noise_calibration" not in names and "bisect_job" not in names and "cell" in names
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")
    assert "noise_calibration" in inspect(engine).get_table_names()
