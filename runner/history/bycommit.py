"""A series read by server commit rather than by campaign time.

The points whose build came from a source (runner.history.provenance) are ordered by
the commit they ran: by ``commit_index`` (position in the repository's first-parent
order) when every such point has one, else by the commit's author date; points of one
commit keep their campaign order. Points without a source are left out (they have no
commit). The changes are the verdicts of :func:`runner.history.series_changes` on the
points in that order, so a step is found between two commits, and each change names
the first commit after it (its ``after`` point's commit).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from runner.history.changes import series_changes
from runner.history.provenance import FactDelta, PointContext, Source, fact_diff, point_contexts
from runner.history.series import DEFAULT_ALPHA, DEFAULT_MIN_EFFECT, Change, Point, SeriesKey

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class CommitSeries:
    """A series in commit order.

    Attributes:
        key: the series.
        points: the points built from a source, in commit order.
        sources: the source of each point (same order).
        changes: the verdict on each consecutive pair (``len(points) - 1``), as
            series_changes gives it on this order.
        diffs: per change, the environment and build facts that differ (fact_diff).
        left_out: points of the series without a source (not shown by commit).
        order: ``"commit_index"`` or ``"author_date"``: what ordered the commits.
    """

    key: SeriesKey
    points: list[Point]
    sources: list[Source]
    changes: list[Change]
    diffs: list[list[FactDelta]]
    left_out: int
    order: str

    def first_commit_after(self, i: int) -> Source:
        """The first commit after change ``i`` (between points ``i`` and ``i + 1``)."""
        return self.sources[i + 1]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``points`` (each with its ``source``), ``changes`` (each with
        ``first_commit`` and ``env_diff``), ``left_out``, ``order``."""
        pts = []
        for p, s in zip(self.points, self.sources):
            d = p.as_dict()
            d["source"] = s.as_dict()
            pts.append(d)
        chs = []
        for i, (c, diff) in enumerate(zip(self.changes, self.diffs)):
            d = c.as_dict()
            d["first_commit"] = self.first_commit_after(i).as_dict()
            d["env_diff"] = [x.as_dict() for x in diff]
            chs.append(d)
        return {"series": self.key.as_dict(), "title": self.key.title, "points": pts, "changes": chs,
                "left_out": self.left_out, "order": self.order}


def _date_key(s: Source) -> datetime:
    d = s.date
    if d is None:
        return _EPOCH
    return d if d.tzinfo is not None else d.replace(tzinfo=UTC)


def commit_order(points: list[Point], contexts: list[PointContext]) -> tuple[list[int], str]:
    """Indices of the points that have a source, in commit order (module docstring), and
    what ordered them (``"commit_index"`` or ``"author_date"``)."""
    have = [i for i, c in enumerate(contexts) if c.source is not None]
    srcs = {i: contexts[i].source for i in have}
    if all(s is not None and s.commit_index is not None for s in srcs.values()):
        return sorted(have, key=lambda i: (srcs[i].commit_index, points[i].campaign_id)), "commit_index"  # type: ignore[union-attr]
    return sorted(have, key=lambda i: (_date_key(srcs[i]), points[i].campaign_id)), "author_date"  # type: ignore[arg-type]


def series_by_commit(session: Session, *, key: SeriesKey, points: list[Point], alpha: float = DEFAULT_ALPHA,
                     min_effect: float = DEFAULT_MIN_EFFECT) -> CommitSeries:
    """The series ``key`` (its ``points``, as runner.history.series_points gives them) in
    commit order, with the verdicts on that order and the facts that differ at each change.

    Raises ValueError when alpha is not in (0, 1] or min_effect < 0."""
    contexts = point_contexts(session, key=key, points=points)
    idx, order = commit_order(points, contexts)
    pts = [points[i] for i in idx]
    srcs = [contexts[i].source for i in idx]
    changes = series_changes(key, pts, alpha=alpha, min_effect=min_effect) if len(pts) >= 2 else []
    diffs = [fact_diff(contexts[idx[j]].facts, contexts[idx[j + 1]].facts) for j in range(len(changes))]
    return CommitSeries(key, pts, [s for s in srcs if s is not None], changes, diffs, len(points) - len(pts), order)
