"""The skip policy of the suite (tests.support.skips, the hooks of tests/conftest.py): a
pytest run of a sample module, once as a developer runs it and once under CI, counted
from pytest's own summary line."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docker_support import docker_endpoint, permission_denied
from tests.support.skips import MACHINE_LACKS, is_machine_skip, require_all

REPO = Path(__file__).resolve().parents[1]

SAMPLE = '''
import pytest
from tests.support.skips import lacks_if, machine_lacks

def test_tool_missing():
    pytest.skip("wget: binary not found in PATH; apt-get install wget")

def test_machine_lacks_root():
    machine_lacks("root: ip netns add needs CAP_SYS_ADMIN")

@lacks_if(True, "netem in this kernel")
def test_machine_mark():
    pass

@pytest.mark.skipif(True, reason="ansible-inventory not installed")
def test_tool_mark():
    pass

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_xfail():
    assert False

def test_passes():
    pass
'''
MODULE_SKIP = 'import pytest\npytest.importorskip("xferlab_no_such_module")\n\ndef test_never():\n    pass\n'


def _run(tmp_path: Path, **env: str) -> tuple[int, str, dict[str, int]]:
    """(exit status, output, counts of pytest's summary line) of the sample modules."""
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401\n")
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "XFERLAB_REQUIRE_ALL")}
    # no third-party plugins (they take seconds to load and the sample needs none); wide
    # lines, so that the short summary holds each whole reason
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                        "--continue-on-collection-errors", str(tmp_path)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120, env={**base, "PYTHONPATH": str(REPO), "COLUMNS": "1000",
                                                    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **env})
    last = p.stdout.strip().splitlines()[-1]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last)}
    return p.returncode, p.stdout, counts


def test_a_developer_run_skips_what_is_missing(tmp_path):
    rc, out, counts = _run(tmp_path)
    assert rc == 0, out
    assert counts == {"passed": 1, "skipped": 5, "xfailed": 1}, out


@pytest.mark.parametrize("env", [{"CI": "true"}, {"XFERLAB_REQUIRE_ALL": "1"}, {"CI": "1"}])
def test_under_ci_only_what_the_machine_lacks_is_skipped(tmp_path, env):
    rc, out, counts = _run(tmp_path, **env)
    assert rc == 1, out
    # test_tool_missing fails; the skipif mark (setup) and the module skip (collection) are errors
    assert counts == {"failed": 1, "passed": 1, "skipped": 2, "xfailed": 1, "errors": 2}, out
    failed = [line for line in out.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert any("test_tool_missing" in f and "apt-get install wget" in f for f in failed), failed
    assert any("test_tool_mark" in f and "ansible-inventory not installed" in f for f in failed), failed
    assert any("test_module_skip" in f and "xferlab_no_such_module" in f for f in failed), failed
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 2 and all(MACHINE_LACKS in s for s in skipped), skipped


def test_ci_false_is_a_developer_run(tmp_path):
    rc, out, counts = _run(tmp_path, CI="false", XFERLAB_REQUIRE_ALL="0")
    assert rc == 0 and counts["skipped"] == 5, out


def test_require_all_reads_ci_and_the_variable():
    assert require_all({"CI": "true"}) and require_all({"CI": "TRUE"}) and require_all({"CI": "1"})
    assert require_all({"XFERLAB_REQUIRE_ALL": "1"})
    assert not require_all({}) and not require_all({"CI": "false"}) and not require_all({"XFERLAB_REQUIRE_ALL": "0"})
    assert is_machine_skip(f"Skipped: {MACHINE_LACKS}root") and not is_machine_skip("Skipped: wget not installed")


def test_permission_denied_is_found_through_the_sdk_wrapping():
    """The Docker SDK reports a socket it may not open as requests' ConnectionError
    wrapping ``("Connection aborted.", PermissionError(13, ...))``; an engine that is not
    there wraps FileNotFoundError or ConnectionRefusedError, which is not a denial."""
    import requests

    denied = requests.exceptions.ConnectionError(("Connection aborted.", PermissionError(13, "Permission denied")))
    try:
        raise RuntimeError("Error while fetching server API version") from denied
    except RuntimeError as e:
        assert permission_denied(e)
    absent = requests.exceptions.ConnectionError(("Connection aborted.", FileNotFoundError(2, "No such file")))
    refused = requests.exceptions.ConnectionError(("Connection aborted.", ConnectionRefusedError(111, "refused")))
    assert not permission_denied(absent) and not permission_denied(refused)
    assert docker_endpoint({}) == "unix:///var/run/docker.sock"
    assert docker_endpoint({"DOCKER_HOST": "unix:///tmp/x.sock"}) == "unix:///tmp/x.sock"
