"""Settings: one pydantic-settings class per process reads every XFERLAB_* variable,
docs/configuration.md lists each, and no other module reads one from os.environ."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from dashboard.settings import DashboardSettings
from runner.config import REPO_ROOT, Settings, get_settings

DOC = REPO_ROOT / "docs" / "configuration.md"


def _variable(name: str, cls: type[Settings]) -> str:
    alias = cls.model_fields[name].validation_alias
    return alias if isinstance(alias, str) else f"XFERLAB_{name.upper()}"


@pytest.mark.parametrize("name", list(DashboardSettings.model_fields))
def test_every_variable_has_a_docstring_and_a_row_in_the_docs(name):
    var = _variable(name, DashboardSettings)
    description = DashboardSettings.model_fields[name].description or ""
    assert description.startswith(f"``{var}``:"), f"{name}: the field docstring must start with ``{var}``:"
    assert re.search(rf"^\| `{var}` \|", DOC.read_text(), re.M), f"{var} has no row in {DOC.name}"


def test_settings_follow_the_environment_without_clearing(monkeypatch, tmp_path):
    monkeypatch.setenv("XFERLAB_MAX_CELLS", "7")
    assert get_settings().max_cells == 7
    monkeypatch.setenv("XFERLAB_MAX_CELLS", "8")
    monkeypatch.setenv("XFERLAB_TUNING_FILE", str(tmp_path / "t.json"))
    assert (get_settings().max_cells, get_settings().tuning_file) == (8, tmp_path / "t.json")
    monkeypatch.delenv("XFERLAB_MAX_CELLS")
    assert get_settings().max_cells == 100_000
    assert get_settings() is get_settings()


def test_list_and_dict_variables(monkeypatch):
    monkeypatch.setenv("XFERLAB_INVENTORY_DIRS", "/a:~/b::")
    monkeypatch.setenv("XFERLAB_DOCKER_LABELS", "k=v,junk,x=y=z")
    monkeypatch.setenv("XFERLAB_API_TOKEN", "")
    s = DashboardSettings()
    assert s.inventory_dirs == [Path("/a"), Path("~/b").expanduser()]
    assert s.docker_labels == {"k": "v", "x": "y=z"}
    assert s.api_token is None  # empty counts as unset


def test_bad_value_names_the_field(monkeypatch):
    from pydantic import ValidationError

    monkeypatch.setenv("XFERLAB_MAX_CELLS", "many")
    with pytest.raises(ValidationError, match="max_cells"):
        get_settings()


def _environ_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, variable) of every ``os.environ.get("XFERLAB_...")``, ``os.environ["XFERLAB_..."]``,
    ``os.getenv("XFERLAB_...")`` and ``"XFERLAB_..." in os.environ`` in ``tree``."""
    def names_environ(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "get")) or \
            (isinstance(node, ast.Name) and node.id in ("environ", "getenv"))

    def xferlab(node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("XFERLAB_"):
            return node.value
        return None

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and names_environ(node.func) and node.args:
            owner = node.func.value if isinstance(node.func, ast.Attribute) else None
            if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and not names_environ(owner):
                continue
            if var := xferlab(node.args[0]):
                found.append((node.lineno, var))
        elif isinstance(node, ast.Subscript) and names_environ(node.value) and (var := xferlab(node.slice)):
            if not isinstance(node.ctx, ast.Load):
                continue  # setting a variable for a child process is not reading a setting
            found.append((node.lineno, var))
        elif isinstance(node, ast.Compare) and (var := xferlab(node.left)) and \
                any(names_environ(c) for c in node.comparators):
            found.append((node.lineno, var))
    return found


def test_the_checker_sees_each_form():
    src = ('import os\nfrom os import environ, getenv\nos.environ.get("XFERLAB_A")\nos.getenv("XFERLAB_B", "x")\n'
           'os.environ["XFERLAB_C"]\n"XFERLAB_D" in os.environ\nenviron.get("XFERLAB_E")\ngetenv("XFERLAB_F")\n'
           'os.environ["XFERLAB_OK"] = "1"\nd.get("XFERLAB_OK")\nos.environ.get("HOME")\n')
    assert [v for _, v in _environ_reads(ast.parse(src))] == ["XFERLAB_A", "XFERLAB_B", "XFERLAB_C", "XFERLAB_D",
                                                              "XFERLAB_E", "XFERLAB_F"]


def test_no_module_reads_a_setting_from_os_environ():
    offenders = []
    for top in ("runner", "dashboard"):
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            if path == REPO_ROOT / "runner" / "config.py":
                continue
            for line, var in _environ_reads(ast.parse(path.read_text(), str(path))):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{line}: {var}")
    assert not offenders, "read these through runner.config.get_settings():\n" + "\n".join(offenders)
