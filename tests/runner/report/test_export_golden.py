"""Export bytes are pinned: a fixed campaign is stored in the real PostgreSQL (through
the store helpers, as a run stores it), read back with ``runner.report.reader.load_campaign``
and exported in every format; each export must equal, byte for byte, the golden file.
The ``sweep.*`` goldens hold a saturation sweep (the sweep rows, the saturation tables,
the knee); the ``profiled.*`` goldens a cell stored with a server CPU profile (the
"Server CPU profiles" table; the JSON's ``profiles``), whose folded stacks are those of a
real ``perf record`` kept in profile_input.folded.

Regenerate only for an intended change of the export bytes:
``XFERLAB_REGEN_GOLDEN=1 .venv/bin/python -m pytest tests/runner/report/test_export_golden.py``
rewrites the files that differ and fails, printing the unified diff of each; review it,
run the test again (it passes), and say so in the commit.
"""
from __future__ import annotations

import difflib
import json
import math
import os
from itertools import combinations
from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from tests.runner.report.fixtures import SMALL, store_fixed_campaign, store_sweep_campaign, value

GOLDEN = Path(__file__).parent / "golden"
FORMATS = ("text", "rst", "html", "md", "csv", "json")


def exports(engine) -> dict[str, str]:
    """file name -> export text, for the campaign report and a comparison, every format."""
    from runner.report.reader import load_campaign
    from runner.report.render import campaign_report, compare_report

    cid = store_fixed_campaign(engine)
    out: dict[str, str] = {}
    with Session(engine) as s:
        data = load_campaign(s, campaign_id=cid)
        for fmt in FORMATS:
            out[f"campaign.{fmt}"] = campaign_report(data, fmt=fmt)
        out["campaign-speedup.rst"] = campaign_report(data, fmt="rst", speedup=True)
        for fmt in FORMATS:
            out[f"compare.{fmt}"] = compare_report(s, f"{cid}:pyftpdlib 2.2.0", f"{cid}:vsftpd 3.0.3", fmt=fmt)
        sweep = load_campaign(s, campaign_id=store_sweep_campaign(engine))
        for fmt in FORMATS:
            out[f"sweep.{fmt}"] = campaign_report(sweep, fmt=fmt)
        profiled = load_campaign(s, campaign_id=store_profiled_fixed(engine))
        for fmt in FORMATS:
            out[f"profiled.{fmt}"] = campaign_report(profiled, fmt=fmt)
    return out


def store_profiled_fixed(engine) -> int:
    """A campaign of one profiled cell and one unprofiled, their profile fixed: the folded
    stacks of a real ``perf record -F 199 -g -e cpu-clock`` of tests/support/real_profile.py's
    program in mode ``a`` (profile_input.folded: 96 samples), its ``write`` count as
    ``perf stat`` gave it."""
    from runner.metrics.profile_data import ServerProfile, SyscallRow
    from tests.support.real_profile import store_profiled_campaign

    folded = (Path(__file__).parent / "profile_input.folded").read_text()
    profile = ServerProfile(profiler="perf", profiler_version="6.1.187", rate_hz=199, duration_s=1.5, on_cpu=folded,
                            on_cpu_s=96 / 199, syscalls=(SyscallRow("write", 1076),),
                            notes=("no off-CPU stacks in this test profile",))
    return store_profiled_campaign(engine, {"busy": profile, "plain": None}, name="profiled",
                                   elapsed=[1.25, 1.5, 1.75])[0]


@pytest.fixture(autouse=True)
def chartjs_stand_in(tmp_path, monkeypatch):
    """The HTML goldens inline this stand-in for Chart.js (XFERLAB_CHARTJS_PATH): the bytes
    of Debian's build are the package's, not the export's."""
    stub = tmp_path / "chart.min.js"
    stub.write_text("/* Chart.js stand-in of the golden exports */\n")
    monkeypatch.setenv("XFERLAB_CHARTJS_PATH", str(stub))


def _diff(name: str, want: bytes, got: bytes, most: int = 200) -> str:
    """The unified diff (difflib, 2 lines of context) of golden file ``name`` against the
    export, at most ``most`` lines."""
    lines = list(difflib.unified_diff(want.decode(errors="replace").splitlines(),
                                      got.decode(errors="replace").splitlines(),
                                      f"golden/{name}", f"export {name}", n=2, lineterm=""))
    return "\n".join(lines[:most] + ([f"... {len(lines) - most} more lines"] if len(lines) > most else []))


def test_exports_match_golden_files(engine):
    """Every export equals its golden file. With ``XFERLAB_REGEN_GOLDEN=1`` the files that
    differ are rewritten, and the test still fails, showing what changed."""
    got = {name: body.encode() for name, body in exports(engine).items()}
    names = sorted(p.name for p in GOLDEN.iterdir()) if GOLDEN.is_dir() else []
    diffs = [_diff(name, (GOLDEN / name).read_bytes() if name in names else b"", body)
             for name, body in got.items() if name not in names or (GOLDEN / name).read_bytes() != body]
    extra = sorted(set(names) - set(got))
    if os.environ.get("XFERLAB_REGEN_GOLDEN") == "1" and (diffs or extra):
        GOLDEN.mkdir(exist_ok=True)
        for name, body in got.items():
            (GOLDEN / name).write_bytes(body)
        for name in extra:
            (GOLDEN / name).unlink()
        pytest.fail("golden files regenerated; review the change and say so in the commit:\n"
                    + "\n".join(diffs) + "".join(f"\nremoved golden/{n}" for n in extra), pytrace=False)
    assert not extra, f"golden files with no export: {extra}"
    assert not diffs, "exports differ from their golden files:\n" + "\n".join(diffs)


def test_row_of_a_workload_whose_every_cell_failed_has_its_title(engine):
    """The row title comes from the stored cells' parameters (CampaignData.workloads),
    not the catalogue's raw template ``{clients} concurrent clients (STOR {size} file)``."""
    from runner.report.reader import load_campaign
    from runner.report.tables import campaign_table
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell

    spec = parse_spec({"name": "all failed", "repeats": 1, "backend": "local",
                       "servers": [{"name": "pyftpdlib", "version": "2.2.0"}],
                       "workloads": [{"name": "stor_concurrent", "params": SMALL}]})
    with Session(engine, expire_on_commit=False) as s:
        camp = crud.create_campaign(s, spec=spec, backend="local")
        s.commit()
        for c in s.query(Cell).filter(Cell.campaign_id == camp.id):
            crud.finish_cell(s, cell=c, status="failed", error="refused")
        data = load_campaign(s, campaign_id=camp.id)
    table = campaign_table(data)
    assert [r.cells[1].text for r in table.rows] == ["10 concurrent clients (STOR 256K file)"]
    assert table.records[0]["failed"] == 1


# -- figures of the goldens worked by hand -------------------------------------------------
# Raw samples of three rows, from the fixture's formula (fixtures.value) worked out on
# paper: base x level x (1 + step / 100), the steps 0..5 in the order (5 * repeat + shift) % 6.

#: pyftpdlib 2.2.0, STOR: 600.25 MiB/s x (1.00, 1.05, 1.04, 1.03, 1.02, 1.01), repeats 0..5.
STOR_A = [600.25, 630.2625, 624.26, 618.2575, 612.255, 606.2525]
#: vsftpd 3.0.3, STOR: the same steps at 1.30 x 600.25 = 780.325 MiB/s.
STOR_B = [780.325, 819.34125, 811.538, 803.73475, 795.9315, 788.12825]
#: pyftpdlib 1.5.10, RETR: 1.15 x 1500.5 = 1725.575 MiB/s x (1.01, [failed], 1.05, 1.04, 1.03, 1.02).
RETR_1510 = [1742.83075, 1811.85375, 1794.598, 1777.34225, 1760.0865]
#: Logins (s): pyftpdlib 2.2.0 at 0.25 x (1.02, 1.01, 1.00, 1.05, 1.04, 1.03); vsftpd 3.0.3 at
#: 0.5% above (0.25125 x the same steps), so the two interleave.
LOGIN_A = [0.255, 0.2525, 0.25, 0.2625, 0.26, 0.2575]
LOGIN_B = [0.256275, 0.253763, 0.25125, 0.263813, 0.2613, 0.258788]


def _median_and_ci(samples: list[float]) -> tuple[float, float, float, float]:
    """``(median, ci_low, ci_high, coverage)`` by the textbook: the middle order statistic
    (mean of the two middle ones for even n); the CI ``[x_(j), x_(n+1-j)]`` with the
    largest ``j`` whose coverage ``1 - 2 P(B <= j - 1)``, B ~ Binomial(n, 1/2), is still
    >= 95%, or ``[min, max]`` when none reaches it (Hollander & Wolfe 3.6, as
    docs/methodology.md "The confidence interval" states)."""
    x = sorted(samples)
    n = len(x)
    median = x[n // 2] if n % 2 else (x[n // 2 - 1] + x[n // 2]) / 2

    def below(k: int) -> float:  # P(B <= k)
        return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n

    j = 1
    while j + 1 <= (n + 1) // 2 and 1 - 2 * below(j) >= 0.95:
        j += 1
    return median, x[j - 1], x[n - j], 1 - 2 * below(j - 1)


def _exact_mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Two-sided exact Mann-Whitney p for samples without ties: U counts the pairs with
    a > b; under the null every split of the pooled values into |a| and |b| is equally
    likely, so p = 2 x (splits whose U is as far from its mean or farther, one side) /
    C(n, |a|), capped at 1 (Mann & Whitney 1947)."""
    pooled = a + b
    assert len(set(pooled)) == len(pooled), "the enumeration below assumes no ties"

    def u(xs, ys):
        return sum(x > y for x in xs for y in ys)

    observed = u(a, b)
    mean = len(a) * len(b) / 2
    tail = 0
    for idx in combinations(range(len(pooled)), len(a)):
        xs = [pooled[i] for i in idx]
        ys = [pooled[i] for i in range(len(pooled)) if i not in idx]
        tail += u(xs, ys) <= min(observed, 2 * mean - observed)
    return min(1.0, 2 * tail / math.comb(len(pooled), len(a)))


def test_the_hand_worked_samples_are_the_fixtures():
    assert STOR_A == [value(0, "stor", 10, r) for r in range(6)]
    assert STOR_B == [value(2, "stor", 10, r) for r in range(6)]
    assert RETR_1510 == [value(1, "retr", 10, r) for r in (0, 2, 3, 4, 5)]
    assert LOGIN_A == [value(0, "login", 10, r) for r in range(6)]
    assert LOGIN_B == [value(2, "login", 10, r) for r in range(6)]


def _golden(name: str) -> dict:
    return json.loads((GOLDEN / name).read_text())


def test_golden_medians_and_intervals_equal_the_hand_computed_ones():
    """Medians, CI bounds and coverage of the campaign golden equal the textbook values:
    n = 6 gives [min, max] at 96.9% (the first n whose [min, max] passes 95%), the row with
    a failed repeat n = 5 at 93.75%."""
    series = {(s["server"], s["workload"], s["metric"], s["checkpoint"]): s for s in _golden("campaign.json")["series"]}
    for (server, workload, metric), samples in {
            ("pyftpdlib 2.2.0", "stor", "throughput"): STOR_A,
            ("vsftpd 3.0.3", "stor", "throughput"): STOR_B,
            ("pyftpdlib 1.5.10 [use_sendfile=False]", "retr", "throughput"): RETR_1510,
            ("pyftpdlib 2.2.0", "login", "elapsed"): LOGIN_A}.items():
        got = series[(server, workload, metric, None)]
        assert sorted(got["samples"]) == sorted(samples), (server, workload)
        median, lo, hi, coverage = _median_and_ci(samples)
        summary = got["summary"]
        assert summary["n"] == len(samples)
        assert (summary["median"], summary["ci_low"], summary["ci_high"]) == pytest.approx((median, lo, hi),
                                                                                         rel=1e-12)
        assert summary["ci_coverage"] == pytest.approx(coverage, rel=1e-12)
    assert _median_and_ci(STOR_A) == pytest.approx((615.25625, 600.25, 630.2625, 62 / 64))
    assert _median_and_ci(RETR_1510) == pytest.approx((1777.34225, 1742.83075, 1811.85375, 30 / 32))


def test_golden_comparison_holds_a_significant_and_a_not_significant_row():
    """pyftpdlib 2.2.0 vs vsftpd 3.0.3: STOR wholly separated (exact p = 2 / C(12, 6)),
    significant, 1.30x; the logins interleave (U = 15 of 36), not significant."""
    records = {r["workload"]: r for r in _golden("compare.json")["tables"][0]["records"]}
    stor, login = records["stor"], records["login"]
    assert _exact_mann_whitney_p(STOR_A, STOR_B) == pytest.approx(2 / 924)
    assert stor["p_value"] == pytest.approx(2 / 924, rel=1e-9) and stor["significant"] is True
    assert stor["a_median"] == pytest.approx(615.25625) and stor["b_median"] == pytest.approx(615.25625 * 1.3)
    assert stor["norm"] == pytest.approx(1.3)
    p_login = _exact_mann_whitney_p(LOGIN_A, LOGIN_B)
    assert 0.05 < p_login < 1 and login["significant"] is False
    assert login["p_value"] == pytest.approx(p_login, rel=1e-9)
    rows = {row[0]["text"]: row[3]["text"] for row in _golden("compare.json")["tables"][0]["rows"]}
    assert rows["STOR (client -> server)"] == "1.30x faster"
    assert rows["10 concurrent clients (connect, login)"] == "not significant"


def test_golden_setup_shows_each_servers_own_build():
    setups = _golden("campaign.json")["campaign"]["setups"]
    assert setups["vsftpd 3.0.3"]["version"] == "3.0.3-13+b2"
    assert setups["vsftpd 3.0.3"]["obtained"].startswith("debian-extract")
    assert setups["pyftpdlib 1.5.10 [use_sendfile=False]"]["version"] == "1.5.10"
    assert setups["pyftpdlib 2.2.0"]["version"] == "2.2.0"
    assert len({s["config_hash"] for s in setups.values()}) == 3
