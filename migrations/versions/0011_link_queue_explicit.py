"""link_queue_explicit: the stored texts of rated links name their 50 ms queue

Revision ID: 0011
Revises: 0010

Until this revision a rated link's text left its queue out when it was tbf's default of
50 ms (``100mbit`` meant ``tbf ... latency 50ms``); from it the default is 250 ms at the
rate and a rated link's text always names its queue (runner.net.conditions,
docs/methodology.md "The link's queue"). So that a stored ``100mbit`` cannot be read as
the new default, and no history series joins cells of both queues, this revision writes
the queue into every stored text of a rated link that has none: ``100mbit`` ->
``100mbit/queue=50ms``, ``100mbit/1ms/pfifo`` -> ``100mbit/1ms/queue=50ms/pfifo``, in

- ``campaign.spec`` and ``bisect_job.request``: every ``link`` value (a text or a list of
  texts) and every ``label`` (the `` [TEXT]`` the link axis appends);
- ``cell``: ``variant.link``, ``server_spec`` (its ``variant.link`` and ``label``),
  ``server_label`` (``tpd [link=100mbit]``, as runner.spec.request.ServerRequest.label);
  a spec's own label that names no link (the server's history track when given) gets
  `` [100mbit/queue=50ms]`` appended, as the link axis appends a link, so the old cells'
  track is not the one a new spec with that label and the new default gets;
- ``server_build``: ``variant.link`` and ``variant_key`` (the variant as JSON with sorted
  keys, as runner.store.campaigns.build_key);
- ``series_point`` and ``noise_calibration``: ``track`` (a label, or the variant as jsonb
  text, rewritten by PostgreSQL's own jsonb_set) and ``series_point.label``.

Records of what ran are left as they were: the build info's tc commands (``latency 50ms``)
and the ``link`` text in the raw data of the ``link_qdisc`` samples. The rewrite is
written out here (a migration must not change when the application code does);
tests/runner/store/test_link_queue_migration.py checks it against
runner.net.conditions. The downgrade writes the texts back without ``queue=50ms``.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

#: The queue the texts left out before this revision.
OLD_DEFAULT = "queue=50ms"
_RATE = re.compile(r"^[0-9]+(?:\.[0-9]+)?(?:bit|kbit|mbit|gbit)$")
_QDISCS = ("tbf", "pfifo", "fq_codel")
#: A link text inside a label: ``link=TEXT`` of a variant label, `` [TEXT]`` of the link axis.
_IN_VARIANT_LABEL = re.compile(r"(?<=link=)([0-9a-z.%/=_]+)(?=[,\]])")
_IN_AXIS_LABEL = re.compile(r"(?<= \[)([0-9a-z.%/=_]+)(?=\])")


def upgrade_text(text: str) -> str:
    """``100mbit`` -> ``100mbit/queue=50ms``; anything else (loopback, no rate, a queue
    already named, not a link) as it is."""
    parts = text.split("/")
    if not _RATE.match(parts[0]) or any(p.startswith("queue=") for p in parts):
        return text
    at = len(parts) - 1 if parts[-1] in _QDISCS[1:] else len(parts)
    return "/".join(parts[:at] + [OLD_DEFAULT] + parts[at:])


def downgrade_text(text: str) -> str:
    """The inverse of :func:`upgrade_text`: ``100mbit/queue=50ms`` -> ``100mbit``."""
    parts = text.split("/")
    if not _RATE.match(parts[0]) or OLD_DEFAULT not in parts:
        return text
    return "/".join(p for p in parts if p != OLD_DEFAULT)


def rewrite_label(label: str, fix: Callable[[str], str]) -> str:
    """``label`` with each link text in it (``link=TEXT`` followed by ``,`` or ``]``, or
    `` [TEXT]``) passed through ``fix``."""
    label = _IN_VARIANT_LABEL.sub(lambda m: fix(m.group(1)), label)
    return _IN_AXIS_LABEL.sub(lambda m: fix(m.group(1)), label)


def mark_label(label: str, link: str | None, new_link: str | None, fix: Callable[[str], str]) -> str:
    """The label of a server whose variant's link ``link`` becomes ``new_link``: its link
    texts rewritten (:func:`rewrite_label`); a label naming no link text (a spec's own
    label, which is the server's history track) gets `` [NEW_LINK]`` appended, as the link
    axis appends it, so that the track of the old cells is not the new cells' track;
    ``label`` itself when the link is unchanged."""
    if link is None or new_link is None or link == new_link:
        return label
    new = rewrite_label(label, fix)
    if new == label:
        return f"{label} [{new_link}]"
    return new


def rewrite_json(data: Any, fix: Callable[[str], str]) -> Any:
    """``data`` (a spec, a request) with every ``link`` value (a text or a list of texts)
    passed through ``fix``, and every ``label`` by :func:`rewrite_label` (a server's, beside
    a variant with a link, by :func:`mark_label`), at any depth."""
    if isinstance(data, list):
        return [rewrite_json(x, fix) for x in data]
    if not isinstance(data, dict):
        return data
    out = {}
    link = _link_of(data.get("variant"))
    for k, v in data.items():
        if k == "link" and isinstance(v, str):
            out[k] = fix(v)
        elif k == "link" and isinstance(v, list):
            out[k] = [fix(x) if isinstance(x, str) else rewrite_json(x, fix) for x in v]
        elif k == "label" and isinstance(v, str):
            out[k] = mark_label(v, link, fix(link), fix) if link is not None else rewrite_label(v, fix)
        else:
            out[k] = rewrite_json(v, fix)
    return out


def _link_of(variant: Any) -> str | None:
    return variant.get("link") if isinstance(variant, dict) and isinstance(variant.get("link"), str) else None


def _migrate(fix: Callable[[str], str]) -> None:
    bind = op.get_bind()
    j = postgresql.JSONB
    for table, col in (("campaign", "spec"), ("bisect_job", "request")):
        rows = bind.execute(sa.text(f"SELECT id, {col} FROM {table} WHERE {col}::text LIKE '%bit%'")).all()
        for rid, data in rows:
            new = rewrite_json(data, fix)
            if new != data:
                bind.execute(sa.text(f"UPDATE {table} SET {col} = :v WHERE id = :id")
                             .bindparams(sa.bindparam("v", type_=j)), {"v": new, "id": rid})
    labels: dict[tuple[Any, ...], str] = {}  # (campaign or None, server, old label track) -> new track
    rows = bind.execute(sa.text("SELECT id, campaign_id, server, variant, server_spec, server_label FROM cell "
                                "WHERE variant ? 'link' OR server_spec -> 'variant' ? 'link'")).all()
    for rid, cid, server, variant, sspec, label in rows:
        link = _link_of(variant) or _link_of((sspec or {}).get("variant"))
        new_link = fix(link) if link is not None else None
        new_variant = dict(variant or {})
        if _link_of(variant) is not None:
            new_variant["link"] = fix(_link_of(variant))
        new_spec = dict(sspec or {})
        if (text := _link_of(new_spec.get("variant"))) is not None:
            new_spec["variant"] = {**new_spec["variant"], "link": fix(text)}
            if isinstance(new_spec.get("label"), str):
                new_spec["label"] = mark_label(new_spec["label"], link, new_link, fix)
                labels[(cid, server, sspec["label"])] = labels[(None, server, sspec["label"])] = new_spec["label"]
        new_label = mark_label(label, link, new_link, fix)
        if (new_variant, new_spec, new_label) != (variant, sspec, label):
            bind.execute(sa.text("UPDATE cell SET variant = :v, server_spec = :s, server_label = :l WHERE id = :id")
                         .bindparams(sa.bindparam("v", type_=j), sa.bindparam("s", type_=j)),
                         {"v": new_variant, "s": new_spec, "l": new_label, "id": rid})
    rows = bind.execute(sa.text("SELECT id, variant FROM server_build WHERE variant ? 'link'")).all()
    for rid, variant in rows:
        text = _link_of(variant)
        if text is not None and fix(text) != text:
            new = {**variant, "link": fix(text)}
            bind.execute(sa.text("UPDATE server_build SET variant = :v, variant_key = :k WHERE id = :id")
                         .bindparams(sa.bindparam("v", type_=j)),
                         {"v": new, "k": json.dumps(new, sort_keys=True), "id": rid})
    for table, key in (("series_point", "campaign_id, label"), ("noise_calibration", "NULL, NULL")):
        rows = bind.execute(sa.text(f"SELECT id, track, server, {key} FROM {table}")).all()
        for rid, track, server, cid, label in rows:
            sets, args = [], {"id": rid}
            if track.startswith("{"):
                text = _link_of(json.loads(track))
                if text is not None and fix(text) != text:
                    sets.append("track = jsonb_set(CAST(track AS jsonb), '{link}', to_jsonb(CAST(:t AS text)))::text")
                    args["t"] = fix(text)
            elif (new := labels.get((cid, server, track))) is not None and new != track:
                sets.append("track = :t")
                args["t"] = new
            if label is not None and (new := labels.get((cid, server, label), rewrite_label(label, fix))) != label:
                sets.append("label = :l")
                args["l"] = new
            if sets:
                bind.execute(sa.text(f"UPDATE {table} SET {', '.join(sets)} WHERE id = :id"), args)


def upgrade() -> None:
    _migrate(upgrade_text)


def downgrade() -> None:
    _migrate(downgrade_text)
