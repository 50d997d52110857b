"""Read queries over campaigns, cells and samples, as the dashboard shows them.

All helpers are keyword-only, take the session in and only read (conbench ``entities/``
style); rows come back as plain Python values or the ORM objects of
runner.store.models, in the order each docstring gives. Errors of the database
(sqlalchemy.exc.SQLAlchemyError) propagate unchanged; the only error raised here is
:func:`get_campaign`'s LookupError.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from runner.store.models import Campaign, Cell, Sample


def get_campaign(session: Session, *, campaign_id: int) -> Campaign:
    """The campaign ``campaign_id``. Raises LookupError (``no campaign N``) when there is none."""
    camp = session.get(Campaign, campaign_id)
    if camp is None:
        raise LookupError(f"no campaign {campaign_id}")
    return camp


def latest_campaigns(session: Session, *, limit: int, offset: int = 0) -> list[Campaign]:
    """At most ``limit`` campaigns, newest (highest id) first, skipping the ``offset`` newest."""
    return list(session.scalars(select(Campaign).order_by(Campaign.id.desc()).limit(limit).offset(offset)))


def cell_status_counts(session: Session, *, campaign_ids: list[int]) -> dict[int, dict[str, int]]:
    """``{campaign id: {cell status: number of cells}}`` with a (possibly empty) entry for
    every id of ``campaign_ids``; statuses without cells are absent."""
    out: dict[int, dict[str, int]] = {i: {} for i in campaign_ids}
    if campaign_ids:
        rows = session.execute(select(Cell.campaign_id, Cell.status, func.count())
                               .where(Cell.campaign_id.in_(campaign_ids))
                               .group_by(Cell.campaign_id, Cell.status))
        for cid, status, n in rows:
            out[cid][status] = n
    return out


def mean_cell_seconds(session: Session, *, campaign_ids: list[int]) -> dict[int, float]:
    """``{campaign id: mean duration in s}`` of the ``done`` and ``failed`` cells that have
    both start and finish times; campaigns without such a cell are absent."""
    if not campaign_ids:
        return {}
    duration = func.extract("epoch", Cell.finished_at - Cell.started_at)
    rows = session.execute(select(Cell.campaign_id, func.avg(duration))
                           .where(Cell.campaign_id.in_(campaign_ids), Cell.status.in_(("done", "failed")),
                                  Cell.started_at.is_not(None), Cell.finished_at.is_not(None))
                           .group_by(Cell.campaign_id)).all()
    return {cid: float(v) for cid, v in rows if v is not None}


def cells_with_status(session: Session, *, campaign_id: int, statuses: tuple[str, ...]) -> list[Cell]:
    """The cells of a campaign whose status is one of ``statuses``, in ``seq`` order."""
    return list(session.scalars(select(Cell).where(Cell.campaign_id == campaign_id, Cell.status.in_(statuses))
                                .order_by(Cell.seq)))


def latest_done_cells(session: Session, *, campaign_id: int, limit: int) -> list[Cell]:
    """At most ``limit`` ``done`` cells of a campaign, the most recently finished first."""
    return list(session.scalars(select(Cell).where(Cell.campaign_id == campaign_id, Cell.status == "done")
                                .order_by(Cell.finished_at.desc()).limit(limit)))


def cell_values(session: Session, *, cell_ids: list[int], metrics: tuple[str, ...]
                ) -> dict[tuple[int, str], tuple[float, str]]:
    """``{(cell id, metric): (value, unit)}`` of the ``value`` samples of ``metrics`` stored
    for ``cell_ids``; pairs without such a sample are absent."""
    if not cell_ids:
        return {}
    rows = session.execute(select(Sample.cell_id, Sample.metric, Sample.value, Sample.unit)
                           .where(Sample.cell_id.in_(cell_ids), Sample.stat == "value",
                                  Sample.metric.in_(metrics))).all()
    return {(cid, m): (v, u) for cid, m, v, u in rows}


def server_labels(session: Session, *, campaign_id: int) -> list[str]:
    """The server labels of a campaign's cells, each once, in the order of their first cell."""
    return list(dict.fromkeys(session.scalars(select(Cell.server_label).where(Cell.campaign_id == campaign_id)
                                              .order_by(Cell.seq))))


def recent_servers(session: Session, *, campaigns: int) -> list[tuple[int, str]]:
    """``[(campaign id, server label)]`` of the ``campaigns`` newest campaigns, newest campaign
    first, labels in alphabetical order, each pair once."""
    ids = list(session.scalars(select(Campaign.id).order_by(Campaign.id.desc()).limit(campaigns)))
    if not ids:
        return []
    rows = session.execute(select(Cell.campaign_id, Cell.server_label).where(Cell.campaign_id.in_(ids))
                           .distinct().order_by(Cell.campaign_id.desc(), Cell.server_label)).all()
    return [(cid, label) for cid, label in rows]


def fairness_raws(session: Session, *, campaign_id: int, server: str | None = None, workload: str | None = None,
                  params_key: str | None = None) -> list[tuple[int, int, str, str, str, dict[str, Any], Any]]:
    """The per-client lists (the ``raw`` of each ``fairness``/``jain`` sample) of a campaign's
    ``done`` cells, in ``seq`` order, optionally only those of ``server`` (label),
    ``workload`` and ``params_key``: ``[(seq, repeat, server label, workload, params_key,
    params, raw)]``. ``raw`` is the stored JSON as is (the caller checks its shape)."""
    q = (select(Cell.seq, Cell.repeat, Cell.server_label, Cell.workload, Cell.params_key, Cell.params, Sample.raw)
         .join(Sample, Sample.cell_id == Cell.id)
         .where(Cell.campaign_id == campaign_id, Cell.status == "done", Sample.metric == "fairness",
                Sample.stat == "jain", Sample.raw.is_not(None)))
    if server is not None:
        q = q.where(Cell.server_label == server)
    if workload is not None:
        q = q.where(Cell.workload == workload)
    if params_key is not None:
        q = q.where(Cell.params_key == params_key)
    return [(seq, rep, label, wl, key, params, raw)
            for seq, rep, label, wl, key, params, raw in session.execute(q.order_by(Cell.seq))]


def memory_raws(session: Session, *, campaign_id: int, server: str) -> list[tuple[str, int, str, Any]]:
    """The memory timelines (the ``raw`` of each peak ``server_mem_uss`` sample) of the ``done``
    cells of ``server`` (label) in a campaign, in ``seq`` order: ``[(workload, repeat,
    params_key, raw)]``; ``raw`` is the stored JSON as is (``[[t_s, uss, rss_minus_shared,
    nprocs], ...]`` in bytes when well formed)."""
    rows = session.execute(
        select(Cell.workload, Cell.repeat, Cell.params_key, Sample.raw)
        .join(Sample, Sample.cell_id == Cell.id)
        .where(Cell.campaign_id == campaign_id, Cell.server_label == server, Cell.status == "done",
               Sample.metric == "server_mem_uss", Sample.stat == "peak", Sample.raw.is_not(None))
        .order_by(Cell.seq)).all()
    return [(w, r, k, raw) for w, r, k, raw in rows]
