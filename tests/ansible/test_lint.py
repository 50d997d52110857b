"""ansible/ is clean under ansible-lint (production profile) and yamllint: any finding fails.

Both tools come from PyPI with the [test] extra (pyproject.toml); their settings are
ansible/.ansible-lint and ansible/.yamllint. ansible-lint runs offline (no Galaxy):
the collections the roles use (ansible.posix, community.general) come with the
PyPI package ``ansible``.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ANSIBLE_DIR = ROOT / "ansible"
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} is not installed in {BIN}: pip install -e '.[test]'")
    return str(path)


def _env(tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '')}", ANSIBLE_HOME=str(tmp_path / "ansible-home"),
                ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"), NO_COLOR="1", ANSIBLE_NOCOLOR="1")


def test_yamllint_clean(tmp_path: Path) -> None:
    r = subprocess.run([_tool("yamllint"), "--strict", "-c", str(ANSIBLE_DIR / ".yamllint"), str(ANSIBLE_DIR)],
                       capture_output=True, text=True, timeout=120, env=_env(tmp_path))
    assert r.returncode == 0, f"yamllint findings:\n{r.stdout}\n{r.stderr}"
    assert r.stdout.strip() == "", r.stdout


def test_ansible_lint_clean(tmp_path: Path) -> None:
    r = subprocess.run([_tool("ansible-lint"), "--strict", "--nocolor", "-c", str(ANSIBLE_DIR / ".ansible-lint"),
                        str(ANSIBLE_DIR)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env=_env(tmp_path))
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"ansible-lint findings:\n{out[-8000:]}"
    assert "0 failure(s), 0 warning(s)" in out, out[-4000:]


def test_roles_have_the_standard_shape() -> None:
    for role in ("tuning", "docker", "lab", "loadgen"):
        for part in ("defaults", "tasks", "handlers", "meta"):
            assert (ANSIBLE_DIR / "roles" / role / part / "main.yml").is_file(), f"{role}/{part}/main.yml missing"
        import yaml

        defaults = yaml.safe_load((ANSIBLE_DIR / "roles" / role / "defaults" / "main.yml").read_text()) or {}
        bad = [k for k in defaults if not k.startswith(f"{role}_")]
        assert not bad, f"role {role}: variables not prefixed with '{role}_': {bad}"
