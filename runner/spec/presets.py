"""The built-in campaign presets: the YAML specs of ``runner/spec/preset_specs/`` (``classic``:
seed 000's FTP suite; ``seed002``: seed 002's HTTP upload lab; ``seed003``: lftp's buffer
sizes; ``seed004``: 512 wget downloads and their fairness; ``seed004_queues``: its wget cell
over link queues of 64 KiB to 16 MiB; ``realistic``), as ``xferlab run --preset NAME`` and
the dashboard's launch page use them."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.spec.safe_yaml import load_yaml

#: Folder of the preset specs (``<name>.yaml``), shipped as package data.
PRESETS_DIR = Path(__file__).resolve().parent / "preset_specs"


def preset_names() -> list[str]:
    """Names of the built-in presets (the files of :data:`PRESETS_DIR`), sorted, e.g.
    ``["classic", "seed002", "seed003", "seed004"]``."""
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


def preset_summary(name: str) -> str:
    """What preset ``name`` is, in a phrase: the first clause of the comment that opens its
    YAML file (up to the first ``:``, ``;`` or end of sentence), e.g. ``Seed 002's HTTP
    upload lab``; ``""`` when the file opens with no comment.

    Raises:
        LookupError: no such preset (as :func:`preset_data`).
    """
    if name not in preset_names():
        raise LookupError(f"unknown preset {name!r}; known: {', '.join(preset_names())}")
    lines = []
    for line in (PRESETS_DIR / f"{name}.yaml").read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if not text:
            break
        lines.append(text)
    comment = " ".join(lines)
    cut = min((i for i in (comment.find(": "), comment.find("; "), comment.find(". ")) if i >= 0),
              default=len(comment))
    return comment[:cut].rstrip(".")


def preset_facts(name: str) -> str:
    """What preset ``name`` runs, read from its spec: servers, workloads, repeats, driver,
    and the storage, link and TLS axes when given, e.g. ``7 servers; stor, retr, login,
    ...; repeats auto (at most 5)``.

    Raises:
        LookupError: no such preset (as :func:`preset_data`).
    """
    data = preset_data(name)
    servers = data.get("servers") or []
    names = list(dict.fromkeys(str(w.get("name") or f"preset {w.get('preset')}")
                               for w in data.get("workloads") or [] if isinstance(w, dict)))
    repeats = str(data.get("repeats", 5))
    if data.get("max_repeats"):
        repeats += f" (at most {data['max_repeats']})"
    facts = [f"{len(servers)} servers", ", ".join(names), f"repeats {repeats}"]
    if data.get("driver"):
        facts.append(f"driver {data['driver']}")
    for axis in ("storage", "link", "tls"):
        if data.get(axis):
            facts.append(f"{axis} {', '.join(map(str, data[axis]))}")
    return "; ".join(facts)
