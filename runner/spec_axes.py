"""Campaign-level axes expanded into server variants (runner.spec): ``storage:`` (seed
002's disk vs tmpfs) and ``tls:`` (issue 16's plain FTP vs explicit vs implicit FTPS).

An axis with values ``[a, b]`` turns every server whose variant does not set the axis's
key into one server per value, each with ``variant[key] = value`` (and ``label [value]``
when the server has a label). An axis holding only its default value leaves the servers
as they are, so plain specs keep their labels. The expansion is idempotent: expanded
servers carry the key, so validating an expanded spec again changes nothing.
"""
from __future__ import annotations

from typing import Any

from runner.backends.variants import STORAGE_KINDS, TLS_MODES

#: ``(spec field, variant key, known values, default value)`` of each axis, in expansion order.
AXES: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("storage", "storage", STORAGE_KINDS, "disk"),
    ("tls", "tls", TLS_MODES, "none"),
)


def expand_axis(data: dict[str, Any], field: str, key: str, known: tuple[str, ...], default: str) -> dict[str, Any]:
    """``data`` (a spec mapping before validation) with its ``servers`` expanded along the
    axis ``data[field]`` (a list of values of ``known``) into ``variant[key]``. Returns
    ``data`` unchanged when the axis is absent, holds only ``default``, holds an unknown
    value (the field's own validation reports it) or ``servers`` is not a list. The
    ``external`` server is never expanded (xferlab does not configure it)."""
    values = data.get(field)
    if not isinstance(values, list) or not isinstance(data.get("servers"), list):
        return data
    kinds = [k for k in dict.fromkeys(values) if isinstance(k, str) and k in known]
    if len(kinds) != len(set(map(str, values))) or kinds == [default] or not kinds:
        return data
    servers = []
    for srv in data["servers"]:
        variant = srv.get("variant") if isinstance(srv, dict) else None
        if not isinstance(srv, dict) or srv.get("name") == "external" or \
                (isinstance(variant, dict) and key in variant):
            servers.append(srv)
            continue
        for kind in kinds:
            servers.append({**srv, "variant": {**(variant or {}), key: kind},
                            **({"label": f"{srv['label']} [{kind}]"} if srv.get("label") else {})})
    return {**data, "servers": servers}


def expand_axes(data: Any) -> Any:
    """``data`` with every axis of :data:`AXES` expanded (:func:`expand_axis`); anything
    but a mapping is returned as it is (pydantic reports it)."""
    if not isinstance(data, dict):
        return data
    for field, key, known, default in AXES:
        data = expand_axis(data, field, key, known, default)
    return data
