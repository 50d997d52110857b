"""Where each point of a series came from: the server's source commit (for a server built
from a source) and the facts of its environment and build, and the difference of those
facts between the two sides of a change ("why the environment moved").

A point (runner.history.Point) is a group of done cells of one campaign and server
version; its facts are read from the first of those cells (lowest ``seq``) whose
environment class is the point's: its ``environment`` row (runner.metrics.environment
snapshot) and its ``server_build`` row (the backend's ``build_info``).

A build from a source carries ``info["source"]`` = ``{"location", "ref", "commit" (40 hex),
"dirty_hash", "subject", "author_date" (ISO 8601), "commit_index" (position in the
repository's first-parent order, or None)}``.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, tuple_
from sqlalchemy.orm import Session

from runner.history.series import Change, Point, SeriesKey
from runner.store.models import Cell, Environment, ServerBuild
from runner.store.points import track_expr

#: Characters of a commit id shown as its short SHA (git's default abbreviation).
SHORT_SHA = 7
#: The environment and build facts compared across a change, in the order they are
#: shown: fact name -> what it is. ``sysctl NAME`` facts follow ``sysctls``' order.
FACTS: dict[str, str] = {
    "kernel": "kernel release (uname -r)",
    "cpu_model": "CPU model",
    "cores": "logical CPUs",
    "cpu_governor": "cpufreq governors",
    "backend": "backend (local, docker)",
    "docker_network": "docker network mode",
    "server_reuse": "server reuse policy",
    "image": "server image id (docker)",
    "config_hash": "server configuration hash",
    "xferlab_version": "xferlab version",
}


@dataclass(frozen=True)
class Source:
    """A server's source commit, as the build recorded it (module docstring).

    Attributes: location, ref (as asked, may be None), commit (40 hex), dirty_hash (hash
    of an uncommitted diff, or None), subject (first line of the message), author_date
    (ISO 8601 text), commit_index (first-parent position, or None)."""

    location: str
    ref: str | None
    commit: str
    dirty_hash: str | None
    subject: str
    author_date: str
    commit_index: int | None

    @property
    def short(self) -> str:
        """The short SHA, with ``+dirty`` when built from a tree with uncommitted changes."""
        return self.commit[:SHORT_SHA] + ("+dirty" if self.dirty_hash else "")

    @property
    def date(self) -> datetime | None:
        """``author_date`` parsed (None when it is not ISO 8601)."""
        try:
            return datetime.fromisoformat(self.author_date)
        except (TypeError, ValueError):
            return None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the recorded keys plus ``short``."""
        return {"location": self.location, "ref": self.ref, "commit": self.commit, "dirty_hash": self.dirty_hash,
                "subject": self.subject, "author_date": self.author_date, "commit_index": self.commit_index,
                "short": self.short}


def source_of(info: dict[str, Any] | None) -> Source | None:
    """The :class:`Source` of a build's ``info`` (ServerBuild.info), None when it has no
    ``source`` or its ``commit`` is not 40 hex characters."""
    src = (info or {}).get("source")
    if not isinstance(src, dict):
        return None
    commit = str(src.get("commit") or "")
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit.lower()):
        return None
    index = src.get("commit_index")
    return Source(location=str(src.get("location") or ""), ref=src.get("ref"), commit=commit.lower(),
                  dirty_hash=src.get("dirty_hash") or None, subject=str(src.get("subject") or ""),
                  author_date=str(src.get("author_date") or ""),
                  commit_index=index if isinstance(index, int) and not isinstance(index, bool) else None)


def facts_of(env: dict[str, Any] | None, build_info: dict[str, Any] | None, config_hash: str | None
             ) -> dict[str, Any]:
    """The comparable facts (:data:`FACTS`, then ``sysctl NAME`` for each recorded sysctl)
    of an environment snapshot and a build: values as text (lists joined by ``,``), None
    when not recorded."""
    env, info = env or {}, build_info or {}

    def text(v: Any) -> Any:
        if isinstance(v, list):
            return ",".join(str(x) for x in v)
        return None if v is None else str(v)

    out: dict[str, Any] = {
        "kernel": text(env.get("kernel")), "cpu_model": text(env.get("cpu_model")), "cores": text(env.get("cores")),
        "cpu_governor": text(env.get("cpu_governor")), "backend": text(env.get("backend") or info.get("backend")),
        "docker_network": text(env.get("docker_network")), "server_reuse": text(env.get("server_reuse")),
        "image": text(info.get("image_id")), "config_hash": text(config_hash or info.get("config_hash")),
        "xferlab_version": text(env.get("xferlab_version")),
    }
    for name, value in sorted((env.get("sysctls") or {}).items()):
        out[f"sysctl {name}"] = text(value)
    return out


@dataclass(frozen=True)
class FactDelta:
    """One fact that differs between two points: ``name`` (a key of :data:`FACTS` or
    ``sysctl NAME``), ``before`` and ``after`` (text, None when not recorded)."""

    name: str
    before: Any
    after: Any

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict ``{name, before, after}``."""
        return {"name": self.name, "before": self.before, "after": self.after}

    def __str__(self) -> str:
        return f"{self.name}: {short_value(self.before)} -> {short_value(self.after)}"


def short_value(v: Any) -> str:
    """A fact's value as one short text: ``-`` for None; a value over 28 characters (a
    sha256 config hash, an image id) cut to its first 19 and ``...``."""
    if v is None:
        return "-"
    t = str(v)
    return t if len(t) <= 28 else t[:19] + "..."


def fact_diff(before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[FactDelta]:
    """The facts (:func:`facts_of`) whose values differ between ``before`` and ``after``,
    in :data:`FACTS` order then sysctls by name; [] when either side is unknown (None)."""
    if before is None or after is None:
        return []
    names = list(FACTS) + sorted({k for k in (*before, *after) if k not in FACTS})
    return [FactDelta(n, before.get(n), after.get(n)) for n in names if before.get(n) != after.get(n)]


@dataclass(frozen=True)
class PointContext:
    """What a point ran on: its source (None when the build came from no source) and its
    facts (:func:`facts_of`; None when none of its cells is found)."""

    source: Source | None
    facts: dict[str, Any] | None


def _contexts(session: Session, wanted: dict[SeriesKey, list[Point]]) -> dict[tuple[SeriesKey, int, str],
                                                                          PointContext]:
    """The :class:`PointContext` of every point of ``wanted`` (series -> points), by
    ``(series, campaign id, version)``: one query over the done cells of those series in
    the points' campaigns."""
    ids = {p.campaign_id for pts in wanted.values() for p in pts}
    if not ids:
        return {}
    track = track_expr()
    rows = session.execute(
        select(Cell.server, track, Cell.workload, Cell.params_key, Cell.campaign_id, Cell.server_version,
               Environment.env_class, Environment.data, ServerBuild.info, ServerBuild.config_hash)
        .outerjoin(Environment, Environment.id == Cell.environment_id)
        .outerjoin(ServerBuild, ServerBuild.id == Cell.build_id)
        .where(tuple_(Cell.server, Cell.workload, Cell.params_key).in_(
               list({(k.server, k.workload, k.params_key) for k in wanted})),
               Cell.campaign_id.in_(ids), Cell.status == "done")
        .order_by(Cell.campaign_id, Cell.seq)).all()
    groups: dict[tuple[str, str, str, str, int, str], list[tuple]] = {}
    for r in rows:
        groups.setdefault((r[0], r[1], r[2], r[3], r[4], r[5] or ""), []).append(r[6:])
    out: dict[tuple[SeriesKey, int, str], PointContext] = {}
    for key, pts in wanted.items():
        for p in pts:
            group = groups.get((key.server, key.track, key.workload, key.params_key, p.campaign_id, p.version), [])
            row = next((r for r in group if r[0] == p.env_class), group[0] if group else None)
            if row is None:
                out[(key, p.campaign_id, p.version)] = PointContext(None, None)
                continue
            source = next((s for s in (source_of(r[2]) for r in group) if s is not None), None)
            out[(key, p.campaign_id, p.version)] = PointContext(source, facts_of(row[1], row[2], row[3]))
    return out


def point_contexts(session: Session, *, key: SeriesKey, points: list[Point]) -> list[PointContext]:
    """The :class:`PointContext` of each of ``points`` (points of series ``key``), in order:
    one query over the done cells of the series in the points' campaigns."""
    ctx = _contexts(session, {key: points})
    return [ctx[(key, p.campaign_id, p.version)] for p in points]


def change_diffs(session: Session, changes: list[Change]) -> list[list[FactDelta]]:
    """For each change, the facts that differ between its ``before`` and ``after`` points
    (:func:`fact_diff`), all read in one query."""
    by_key: dict[SeriesKey, list[Point]] = {}
    for c in changes:
        by_key.setdefault(c.key, []).extend([c.before, c.after])
    ctx = _contexts(session, by_key)
    return [fact_diff(ctx[(c.key, c.before.campaign_id, c.before.version)].facts,
                      ctx[(c.key, c.after.campaign_id, c.after.version)].facts) for c in changes]
