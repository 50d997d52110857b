"""Stored campaigns of a server "built from a source" at known commits, for the tests of
history by commit, the environment diff and the dashboard's commit axis.

Each campaign is real: tpd measured by the local backend (RETR, small transfers). Only
its build row is then replaced, through the store's normal path
(runner.store.campaigns.get_or_create_build and runner.store.points.refresh_points), by
the one a server built from a source records: ``version`` ``git-<12 hex>`` and
``info["source"]`` with the keys a source build writes (location, ref, commit,
dirty_hash, subject, author_date, commit_index). A commit marked slow is measured over a
shaped 100 Mbit/s link (variant ``link: 100mbit/queue=250ms``: the server in its own namespace behind
a tbf qdisc, runner.net.link; needs root): a real slowdown that no load on a shared
machine can hide (about 11 MiB/s against hundreds over loopback), under one ``label``
so every commit stays on one series.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sqlalchemy.orm import Session

#: The series label of the commit campaigns.
LABEL = "tpd-dev"


@dataclass(frozen=True)
class FakeCommit:
    """A commit of the test's history: ``index`` (first-parent position), ``subject``,
    ``slow`` (built with the slowdown); ``sha`` is derived from the index."""

    index: int
    subject: str
    slow: bool

    @property
    def sha(self) -> str:
        return hashlib.sha1(f"commit {self.index}".encode()).hexdigest()

    @property
    def author_date(self) -> str:
        return f"2026-11-{10 + self.index:02d}T09:00:00+00:00"


def commits(n: int, first_slow: int) -> list[FakeCommit]:
    """``n`` commits, slow from index ``first_slow`` on."""
    return [FakeCommit(i, f"change {i}" + (": the slowdown" if i == first_slow else ""),
                       i >= first_slow) for i in range(n)]


def run_commit_campaign(engine, commit: FakeCommit, *, repeats: int = 3, with_index: bool = True) -> int:
    """Run one real campaign (tpd, RETR 32 MiB for 0.5 s, ``repeats`` repeats on one server
    start, local backend, no pinning; over a shaped 100 Mbit/s link when ``commit.slow``) and record its
    build as built from ``commit``. Returns the campaign id."""
    from runner.campaign.loop import run_campaign
    from runner.spec.model import parse_spec
    from runner.store import campaigns as crud
    from runner.store.models import Cell, ServerBuild
    from runner.store.points import refresh_points

    server: dict = {"name": "tpd", "label": LABEL}
    if commit.slow:
        server["variant"] = {"link": "100mbit/queue=250ms"}
    spec = parse_spec({"name": f"commit {commit.index}", "repeats": repeats, "backend": "local", "servers": [server],
                       "server_reuse": "repeats",  # one server start per campaign: the repeats share it
                       "workloads": [{"name": "retr", "params": {"transfer_size": "32M", "duration": 0.5}}]})
    with Session(engine, expire_on_commit=False) as s:
        cid = crud.create_campaign(s, spec=spec, backend="local").id
        s.commit()
    run_campaign(engine, cid)
    with Session(engine, expire_on_commit=False) as s:
        cells = list(s.query(Cell).filter(Cell.campaign_id == cid).order_by(Cell.seq))
        assert cells and all(c.status == "done" for c in cells), [(c.status, c.error) for c in cells]
        built = s.get(ServerBuild, cells[0].build_id)
        assert built is not None
        info = dict(built.info)
        info["version"] = f"git-{commit.sha[:12]}"
        info["source"] = {"location": "/src/tpd", "ref": None, "commit": commit.sha, "dirty_hash": None,
                          "subject": commit.subject, "author_date": commit.author_date,
                          "commit_index": commit.index if with_index else None}
        build = crud.get_or_create_build(s, info=info)
        for c in cells:
            c.build_id, c.server_version = build.id, info["version"]
        s.flush()
        for c in cells:
            refresh_points(s, cell=c)
        # the old points (version "") of the campaign are gone with refresh of the new group:
        # delete the stale ones left under the old version
        from runner.store.models import SeriesPoint

        s.query(SeriesPoint).filter(SeriesPoint.campaign_id == cid,
                                    SeriesPoint.version != info["version"]).delete()
        s.commit()
    return cid
