"""The code rules of docs/architecture.md ("How the rules are enforced"), run by the README's
test command: ruff (lint), mypy (types of runner/ and dashboard/), import-linter (the layering
contracts in pyproject.toml) and the size of modules. Each tool is configured in
pyproject.toml; each test runs it as a subprocess and shows its report when it fails."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
#: Lines of one Python module of runner/ or dashboard/ past which it is looked at again: a
#: module holds one concept, and a concept is not split in two to stay under this.
MAX_MODULE_LINES = 600
#: The modules of runner.report that read the store (the store -> CampaignData reader and the
#: export glue); every other report module renders only the data handed to it.
REPORT_READERS = {"runner.report", "runner.report.reader", "runner.report.render", "runner.report.profile_pairs"}


def _run(tool: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    exe = BIN / tool
    if not exe.exists():
        pytest.fail(f"{tool} is not installed in {BIN}: pip install -e '.[test]'")
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_ruff():
    r = _run("ruff", "check", "--no-cache", "runner", "dashboard", "tests", "benchmarks")
    assert r.returncode == 0, r.stdout + r.stderr


#: mypy's incremental cache (git-ignored): a run re-checks only the modules whose source, or
#: whose dependencies' interface, changed since the last run (mypy compares each module's hash,
#: its options and mypy's version with the cache), so a warm run is seconds instead of minutes
MYPY_CACHE = ROOT / ".mypy_cache"


def test_mypy():
    r = _run("mypy", "--cache-dir", str(MYPY_CACHE))  # files and options: pyproject.toml
    assert r.returncode == 0, r.stdout + r.stderr


def test_import_contracts():
    r = _run("lint-imports", "--no-cache")
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_report_module_is_under_a_contract():
    """A new module of runner/report is either a renderer (in the contract's list) or a reader."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    renderers = next(set(c["source_modules"]) for c in contracts if c["name"].startswith("reports render only"))
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for p in (ROOT / "runner" / "report").rglob("*.py")}
    assert modules - REPORT_READERS == renderers, (
        f"add to the renderers' contract in pyproject.toml: {sorted(modules - REPORT_READERS - renderers)}; "
        f"no longer there: {sorted(renderers - modules)}")


def test_no_module_over_the_line_limit():
    long = {str(p.relative_to(ROOT)): n for top in ("runner", "dashboard") for p in sorted((ROOT / top).rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"over {MAX_MODULE_LINES} lines: does each hold one concept? {long}"
