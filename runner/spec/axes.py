"""The campaign-level axes that expand into server variants: ``storage`` (seed 002: disk
vs tmpfs), ``tls`` (plain FTP vs explicit or implicit FTPS, HTTPS: runner.tls.certs)
and ``link`` (loopback vs a shaped path: runner.net.conditions).

Each axis turns a server of the spec into one server per value listed, the value put
in the server's ``variant`` (so the backend applies it and the label tells the rows
apart: ``tpd [link=100mbit/queue=250ms]``). The default alone (``storage: [disk]``, ``tls: [none]``,
``link: [loopback]``) adds no key, so such specs label and hash as before the axes existed; with
more values listed every copy names its value (``tpd [link=loopback]``, ``tpd
[link=100mbit/queue=250ms]``), which also makes the expansion idempotent: a stored spec validated
again (runner.campaign.loop reads it back) expands to the same servers. A server whose variant already
names the key, and ``external`` servers (xferlab does not place them), are left as
they are. Both run on the raw spec (a pydantic ``mode="before"`` validator of
runner.spec.model.CampaignSpec), before the servers are validated.
"""
from __future__ import annotations

from typing import Any

from runner.catalogue.variants import STORAGE_KINDS, TLS_MODES
from runner.net.conditions import LinkError, link_text


def expand_servers(servers: list[Any], key: str, values: list[str]) -> list[Any]:
    """``servers`` (raw spec dicts) with each eligible server repeated once per value of
    ``values``, variant ``key`` set to it. A ``label`` given in the spec gets `` [VALUE]``
    appended so labels stay unique."""
    out = []
    for srv in servers:
        variant = srv.get("variant") if isinstance(srv, dict) else None
        if not isinstance(srv, dict) or srv.get("name") == "external" or \
                (isinstance(variant, dict) and key in variant):
            out.append(srv)
            continue
        for value in values:
            label = {"label": f"{srv['label']} [{value}]"} if srv.get("label") else {}
            out.append({**srv, "variant": {**(variant or {}), key: value}, **label})
    return out


def _listed_axis(data: dict[str, Any], field: str, known: tuple[str, ...], default: str) -> dict[str, Any]:
    """Expand the axis ``data[field]``, a list of values of ``known``, into variant key
    ``field``; the default alone, an unknown value (the field's own validation reports
    it) or no list leaves ``data`` as it is."""
    values = data.get(field)
    if not isinstance(values, list) or not isinstance(data.get("servers"), list):
        return data
    kinds = [k for k in dict.fromkeys(values) if isinstance(k, str) and k in known]
    if len(kinds) != len(set(map(str, values))) or kinds == [default] or not kinds:
        return data
    return {**data, "servers": expand_servers(data["servers"], field, kinds)}


def storage_axis(data: dict[str, Any]) -> dict[str, Any]:
    """Expand ``storage: [disk, tmpfs]`` into the servers (module docstring); bad kinds
    are left for the field's own validation to report."""
    return _listed_axis(data, "storage", STORAGE_KINDS, "disk")


def tls_axis(data: dict[str, Any]) -> dict[str, Any]:
    """Expand ``tls: [none, explicit]`` (``none``, ``explicit``, ``implicit``, ``https``)
    into the servers (module docstring); bad modes are left for the field's validation."""
    return _listed_axis(data, "tls", TLS_MODES, "none")


def expand_axes(data: Any) -> Any:
    """``data`` with the storage, TLS and link axes expanded, in that order; anything but
    a mapping is returned as it is (pydantic reports it)."""
    if not isinstance(data, dict):
        return data
    return link_axis(tls_axis(storage_axis(data)))


def link_axis(data: dict[str, Any]) -> dict[str, Any]:
    """Expand ``link: [loopback, 100mbit]`` into the servers (module docstring), each
    link in its canonical text (runner.net.conditions.LinkSpec.text), and store the
    canonical list back. A bad entry is left for the field's own validation to report."""
    links = data.get("link")
    if isinstance(links, (str, dict)):
        links = [links]
    if not isinstance(links, list) or not isinstance(data.get("servers"), list):
        return data
    try:
        texts = list(dict.fromkeys(link_text(v) for v in links))
    except LinkError:
        return data
    data = {**data, "link": texts}
    if texts == ["loopback"]:
        return data
    return {**data, "servers": expand_servers(data["servers"], "link", texts)}


def check_link_list(v: list[Any]) -> list[str]:
    """The ``link`` field's validation: each entry in canonical text (``link_text``).

    Raises:
        ValueError: an entry that is not a link, naming it and why (runner.net.conditions).
    """
    out = []
    for i, item in enumerate(v):
        try:
            out.append(link_text(item))
        except LinkError as exc:
            raise ValueError(f"entry {i}: {exc}") from None
    return out
