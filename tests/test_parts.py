"""The split of ``make test`` into its two passes (tests.support.parts, scripts/test.sh):
every module named in PARALLEL exists, and ``--part`` gives each collected test to exactly
one pass."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.parts import PARALLEL

REPO = Path(__file__).resolve().parents[1]


def test_every_parallel_entry_is_a_test_module():
    missing = sorted(p for p in PARALLEL if not (REPO / p).is_file())
    assert not missing, f"tests/support/parts.py names modules that do not exist: {missing}"
    assert all(Path(p).name.startswith("test_") and p.startswith("tests/") for p in PARALLEL)


def _collected(part: str, *paths: str) -> set[str]:
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "--part", part, *paths], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 5), p.stdout[-2000:] + p.stderr[-2000:]
    return {line for line in p.stdout.splitlines() if "::" in line}


def test_the_two_parts_split_the_collection():
    calibration = "tests/runner/history/test_calibration.py"  # runs alone, but for four marked tests
    paths = ("tests/runner/spec/test_sweep.py", "tests/runner/cell/test_watchdog.py", "tests/test_parts.py",
             calibration)
    every = _collected("all", *paths)
    parallel, alone = _collected("parallel", *paths), _collected("alone", *paths)
    assert parallel and alone and not parallel & alone and parallel | alone == every
    modules = {t.split("::")[0] for t in parallel}, {t.split("::")[0] for t in alone}
    assert modules == ({"tests/runner/spec/test_sweep.py", "tests/test_parts.py", calibration},
                       {"tests/runner/cell/test_watchdog.py", calibration}), modules
    assert {t for t in alone if t.startswith(calibration)} == {
        f"{calibration}::test_calibrate_tpd_retr_reports_a_sane_noise_floor"}
