"""Adaptive repeats: run a cell group until its figure is steady, within bounds.

A *cell group* is every repeat of one (server, workload, parameters) of a campaign.
With ``repeats: auto`` (or ``max_repeats`` set) a campaign starts with ``repeats``
cells per group (3 for auto) and, each time a group's last queued cell is done, adds
one more while the group's figure is not steady and the group has fewer than
``max_repeats`` (10 for auto) cells. The rule follows the Phoronix Test Suite's
(``pts-core``: run again while the standard deviation of the results is above a
threshold, up to a maximum number of runs), with the criterion stated as a
confidence interval:

    steady  <=>  t(0.975, n - 1) * s / sqrt(n)  <=  target_ci * |median|

where ``s`` is the sample standard deviation of the group's values of its primary
metric (the one its table row shows: throughput or elapsed) and ``t`` Student's t
quantile (scipy.stats.t). That is the half-width of the 95% Student-t confidence
interval of the mean, relative to the median. The reports show the order-statistic CI
of the median (runner.report.stats), which cannot reach 95% coverage below 6 samples;
the t interval can, so it is the stopping rule, and it is the stricter one at small n
(t = 4.30 at n = 3: the values must agree within about 1% for a 2.5% target).

Failed cells do not get more repeats (a figure that is not measured cannot become
steady), and a group with fewer than two measured values is never steady.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from scipy import stats as sstats
from sqlalchemy import func, select

from runner.catalogue.workloads import WORKLOADS
from runner.store.models import Campaign, Cell, Sample

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from runner.spec.model import CampaignSpec


def relative_half_width(values: Sequence[float], confidence: float = 0.95) -> float | None:
    """Half-width of the Student-t confidence interval of the mean of ``values``
    (``confidence`` two-sided), divided by ``|median|``. None for fewer than two
    values or a zero median; 0.0 when all values are equal. Raises ValueError for a
    NaN or infinite value."""
    if any(not math.isfinite(v) for v in values):
        raise ValueError("values must be finite")
    n = len(values)
    if n < 2:
        return None
    med = statistics.median(values)
    if med == 0:
        return None
    s = statistics.stdev(values)
    t = float(sstats.t.ppf(0.5 + confidence / 2.0, n - 1))
    return t * s / math.sqrt(n) / abs(med)


def needs_more(values: Sequence[float], *, minimum: int, maximum: int, target: float) -> bool:
    """Whether a group with the measured ``values`` should get another repeat: fewer
    than ``minimum`` values (a failed cell left the group short) or, below ``maximum``,
    a :func:`relative_half_width` above ``target`` (or undefined)."""
    n = len(values)
    if n >= maximum:
        return False
    if n < minimum:
        return True
    rel = relative_half_width(values)
    return rel is None or rel > target


def _group(cell: Cell) -> tuple[Any, ...]:
    """SQL conditions selecting the cells of ``cell``'s group."""
    return (Cell.profiled.is_(False), Cell.campaign_id == cell.campaign_id, Cell.server_label == cell.server_label,
            Cell.workload == cell.workload, Cell.params_key == cell.params_key)


def group_values(session: Session, cell: Cell) -> list[float]:
    """Values of the primary metric of the done cells of ``cell``'s group (same
    campaign, server label, workload and parameters), in repeat order."""
    info = WORKLOADS.get(cell.workload)
    metric = info.primary if info else "elapsed"
    rows = session.execute(
        select(Sample.value).join(Cell).where(*_group(cell), Cell.status == "done",
                                              Sample.metric == metric, Sample.stat == "value").order_by(Cell.repeat))
    return [float(v) for v in rows.scalars()]


def add_repeat_if_needed(session: Session, cell: Cell, spec: CampaignSpec) -> Cell | None:
    """After ``cell`` was stored: when the campaign adds repeats (``spec.max_repeats``),
    ``cell`` was done and is the last unfinished cell of its group, and the group
    :func:`needs_more`, queue one more cell of the group (next repeat index, after
    every other cell of the campaign) and count it in ``cells_total``. Runs inside the
    caller's transaction (runner.store.campaigns.finish_cell's ``then``), which commits.
    Returns the new cell or None."""
    if not spec.max_repeats or cell.status != "done" or cell.profiled:
        return None
    group = _group(cell)
    pending = session.scalar(select(func.count()).select_from(Cell).where(
        *group, Cell.status.in_(("queued", "running"))))
    made = session.scalar(select(func.count()).select_from(Cell).where(*group)) or 0
    if pending or made >= spec.max_repeats:
        return None
    values = group_values(session, cell)
    if not needs_more(values, minimum=spec.repeats, maximum=spec.max_repeats, target=spec.target_ci):
        return None
    last_rep = session.scalar(select(func.max(Cell.repeat)).where(*group)) or 0
    last_seq = session.scalar(select(func.max(Cell.seq)).where(Cell.campaign_id == cell.campaign_id)) or 0
    new = Cell(campaign_id=cell.campaign_id, seq=last_seq + 1, server=cell.server,
               server_version=cell.server_version, variant=dict(cell.variant), server_label=cell.server_label,
               server_spec=dict(cell.server_spec), workload=cell.workload, params=dict(cell.params),
               params_key=cell.params_key, repeat=last_rep + 1, status="queued")
    camp = session.get(Campaign, cell.campaign_id, with_for_update=True)
    if camp is not None:
        camp.cells_total += 1
    session.add(new)
    session.flush()
    return new


def steadiness(values: Sequence[float]) -> str:
    """``"+-3.1%"``: the relative half-width :func:`needs_more` judged, for messages."""
    rel = relative_half_width(values)
    return "undefined" if rel is None else f"+-{rel * 100:.1f}%"
