"""The built-in campaign presets: the YAML specs of ``runner/spec/preset_specs/`` (``classic``:
seed 000's FTP suite; ``seed002``: seed 002's HTTP upload lab; ``seed003``: lftp's buffer
sizes; ``seed004``: 512 wget downloads and their fairness), as ``xferlab run --preset
NAME`` and the dashboard's launch page use them."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.spec.safe_yaml import load_yaml

#: Folder of the preset specs (``<name>.yaml``), shipped as package data.
PRESETS_DIR = Path(__file__).resolve().parent / "preset_specs"


def preset_names() -> list[str]:
    """Names of the built-in presets, sorted, e.g. ``["classic", "seed002"]``."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.yaml"))


def preset_data(name: str) -> dict[str, Any]:
    """The spec dict of preset ``name`` (not yet validated: runner.spec.model.parse_spec).

    Raises:
        LookupError: no such preset (the message lists the known ones).
    """
    if name not in preset_names():
        raise LookupError(f"unknown preset {name!r}; known: {', '.join(preset_names())}")
    data = load_yaml((PRESETS_DIR / f"{name}.yaml").read_text())
    if not isinstance(data, dict):
        raise LookupError(f"preset {name!r} is not a mapping")
    return data
