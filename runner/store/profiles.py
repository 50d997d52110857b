"""Store and read the server CPU profile of a cell (table ``cell_profile``).

A profile is written with its cell's samples, in the transaction of
:func:`runner.store.campaigns.finish_cell`; these helpers take the session in and never
commit. The store knows nothing of the profilers: the caller hands over the plain fields
(runner.cell.profile_rows turns a ``ServerProfile`` into a :class:`CellProfile` row and back).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from runner.store.models import Cell, CellProfile

#: Keys of one syscall row as stored (``syscalls`` JSONB): name (str), count (int),
#: total_s (float seconds or None), errors (int or None).
SYSCALL_KEYS = ("name", "count", "total_s", "errors")


def syscall_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` checked and reduced to :data:`SYSCALL_KEYS`.

    Raises ValueError naming the row and field for a name that is not a non-empty string,
    a count that is not a non-negative integer, a time that is not a non-negative number,
    or an error count that is not a non-negative integer."""
    out = []
    for i, r in enumerate(rows):
        name, count, total, errors = (r.get(k) for k in SYSCALL_KEYS)
        if not isinstance(name, str) or not name:
            raise ValueError(f"syscalls[{i}].name: a non-empty string, not {name!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"syscalls[{i}].count: a non-negative integer, not {count!r}")
        if total is not None and (isinstance(total, bool) or not isinstance(total, int | float) or total < 0):
            raise ValueError(f"syscalls[{i}].total_s: a non-negative number of seconds or None, not {total!r}")
        if errors is not None and (isinstance(errors, bool) or not isinstance(errors, int) or errors < 0):
            raise ValueError(f"syscalls[{i}].errors: a non-negative integer or None, not {errors!r}")
        out.append({"name": name, "count": count, "total_s": None if total is None else float(total),
                    "errors": errors})
    return out


def save_profile(session: Session, *, cell_id: int, row: CellProfile) -> CellProfile:
    """Add ``row`` as the profile of cell ``cell_id`` (replacing a profile stored before);
    flushes, does not commit. Returns the row."""
    old = session.get(CellProfile, cell_id)
    if old is not None:
        session.delete(old)
        session.flush()
    row.cell_id = cell_id
    session.add(row)
    session.flush()
    return row


def load_profile(session: Session, *, cell_id: int) -> CellProfile | None:
    """The profile stored for cell ``cell_id``, or None when the cell was not profiled."""
    return session.get(CellProfile, cell_id)


def profiled_cell_ids(session: Session, *, campaign_id: int) -> list[int]:
    """Ids of the cells of campaign ``campaign_id`` that have a stored profile, in ``seq`` order."""
    return list(session.scalars(select(Cell.id).join(CellProfile, CellProfile.cell_id == Cell.id)
                                .where(Cell.campaign_id == campaign_id).order_by(Cell.seq)))


def campaign_profiles(session: Session, *, campaign_id: int) -> list[tuple[Cell, CellProfile]]:
    """``[(cell, profile)]`` of every profiled cell of campaign ``campaign_id``, in ``seq`` order."""
    rows = session.execute(select(Cell, CellProfile).join(CellProfile, CellProfile.cell_id == Cell.id)
                           .where(Cell.campaign_id == campaign_id).order_by(Cell.seq)).all()
    return [(c, p) for c, p in rows]


def profiled_groups(session: Session, *, campaign_ids: Iterable[int]) -> set[tuple[int, str, str, str]]:
    """``{(campaign id, server label, workload, params_key)}`` that have at least one
    profiled cell, over the campaigns ``campaign_ids``."""
    ids = sorted(set(campaign_ids))
    if not ids:
        return set()
    rows = session.execute(select(Cell.campaign_id, Cell.server_label, Cell.workload, Cell.params_key)
                           .join(CellProfile, CellProfile.cell_id == Cell.id)
                           .where(Cell.campaign_id.in_(ids)).distinct()).all()
    return {(cid, label, w, k) for cid, label, w, k in rows}


def side_profiles(session: Session, *, campaign_id: int, server_label: str, workload: str | None = None,
                  params_key: str | None = None) -> list[tuple[Cell, CellProfile]]:
    """``[(cell, profile)]`` of the profiled ``done`` or ``failed`` cells of one server of a
    campaign, optionally of one workload and parameter set, in ``seq`` order."""
    q = (select(Cell, CellProfile).join(CellProfile, CellProfile.cell_id == Cell.id)
         .where(Cell.campaign_id == campaign_id, Cell.server_label == server_label,
                Cell.status.in_(("done", "failed"))))
    if workload is not None:
        q = q.where(Cell.workload == workload)
    if params_key is not None:
        q = q.where(Cell.params_key == params_key)
    return [(c, p) for c, p in session.execute(q.order_by(Cell.seq)).all()]
