"""History points kept at store time: the ``series_point`` table (models.SeriesPoint).

A history series (runner.history) is ``(server, track, workload, params_key, metric)``
and each of its points is one (campaign, server version): the raw figures of that
group's ``done`` cells. Aggregating them from ``sample`` on every request cost the
regressions API most of its time (benchmarks/dashboard_bench.py), so each point is
stored, derived from the samples by one SQL statement (:func:`points_select`):

* :func:`refresh_points` recomputes the points of one cell's group from its samples; it
  runs in the transaction that finishes the cell (runner.store.campaigns.finish_cell),
  under the campaign's row lock, so two workers finishing cells of one group write in
  turn and the second sees the first's samples (READ COMMITTED: each statement sees
  what was committed before it started).
* :func:`rebuild_points` recomputes every point (after the definition of a series
  changes, or to check the table: the result must equal what is stored).
* Migration 0004 created the table and filled it from the samples already stored
  (the same aggregation, written out in SQL as of that revision); migration 0005 renamed
  the CPU cost points of the cells stored before it to their process-tree series, and
  migration 0010 those of the cgroup figures stored before it to their whole-phase series.

Deleting a campaign deletes its points (foreign key ``ON DELETE CASCADE``). Anything
that writes ``sample`` or ``cell.status`` outside :func:`finish_cell` must call
:func:`refresh_points` for the cells it changed.
"""
from __future__ import annotations

from collections import defaultdict

from sqlalchemy import Text, and_, case, cast, delete, func, insert, literal, or_, select, text
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session

from runner.catalogue.workloads import WORKLOADS
from runner.store.models import Campaign, Cell, Environment, Sample, SeriesPoint

#: Series metric of a workload's primary figure (its ``WorkloadInfo.primary``, stat ``value``).
PRIMARY = ""
#: Peak-memory series: sample metric, stat ``peak``, bytes.
PEAK_MEMORY = ("server_mem_uss", "server_mem_rss_minus_shared")
#: Server CPU per unit of work (runner.cell.samples.efficiency_samples), stat ``value``:
#: s per GiB moved (transfers), us per completed operation (logins, QUITs), of cells whose
#: server CPU came from the server's cgroup (``cell.server_cpu_source`` ``cgroup``, or
#: unknown) over the measured span (``cell.server_cpu_window`` ``span``, or unknown).
CPU_COST = ("server_cpu_per_gib", "server_cpu_per_op")
#: The same figures of cells whose server CPU is a process-tree sum (``server_cpu_source``
#: ``tree``: every cell stored before the cgroup figure): a series of their own, so a
#: history never compares one with the other (docs/methodology.md, "What server CPU counts").
TREE_SUFFIX = "_tree"
CPU_COST_TREE = tuple(m + TREE_SUFFIX for m in CPU_COST)
#: The same figures of cells whose cgroup figure spans the whole phase, its untimed set-up
#: and teardown included (``server_cpu_window`` ``phase``: every cell stored before the
#: span figure, and drivers that do not mark their span): a series of their own too.
PHASE_SUFFIX = "_phase"
CPU_COST_PHASE = tuple(m + PHASE_SUFFIX for m in CPU_COST)
#: Sustainable users of a capacity search (runner.campaign.capacity): sample ``capacity``,
#: stat ``users``, on the cell that ended the search; its point's ``params_key`` is the
#: cell's without ``clients`` and ``rate`` (the key every step of the search shares), so
#: searches of several campaigns make one series whatever N each ended at.
CAPACITY = "capacity"
#: Every series metric a point can have.
POINT_METRICS = (PRIMARY, *PEAK_MEMORY, *CPU_COST, *CPU_COST_TREE, *CPU_COST_PHASE, CAPACITY)
#: PostgreSQL regular expression of a step's ``clients=N`` and ``rate=R`` (search_key_expr).
_STEP_PARAMS_RE = "(^|,)(clients|rate)=[^,]*"


def search_key_expr(key):
    """SQL expression: the parameter key ``key`` without ``clients`` and ``rate`` (as
    runner.campaign.capacity.search_key): ``clients=4,file_size=1,rate=2.0`` -> ``file_size=1``."""
    return func.regexp_replace(func.regexp_replace(key, _STEP_PARAMS_RE, "", "g"), "^,", "")


def track_expr():
    """SQL expression of a cell's track: the spec label if given, else the variant as
    jsonb text (PostgreSQL's canonical form, e.g. ``{"use_sendfile": false}``)."""
    return func.coalesce(Cell.server_spec["label"].astext, cast(Cell.variant, Text))


def figure_filter(metrics: tuple[str, ...] = POINT_METRICS):
    """WHERE clause selecting the samples of the given series metrics: each workload's
    primary figure (stat ``value``) for ``""``, the ``peak`` stat of memory metrics,
    the ``value`` stat of CPU cost metrics (:data:`CPU_COST` of cells whose server CPU is
    a cgroup figure over the measured span, :data:`CPU_COST_TREE` of those whose is a
    process-tree figure, :data:`CPU_COST_PHASE` of cgroup figures over the whole phase).
    Raises ValueError for another metric."""
    bad = [m for m in metrics if m not in POINT_METRICS]
    if bad:
        raise ValueError(f"unknown series metric(s) {bad}: use any of {list(POINT_METRICS)}")
    parts = []
    if PRIMARY in metrics:
        by_metric: dict[str, list[str]] = defaultdict(list)
        for name, info in WORKLOADS.items():
            by_metric[info.primary].append(name)
        parts.append(and_(Sample.stat == "value",
                          or_(*(and_(Cell.workload.in_(names), Sample.metric == metric)
                                for metric, names in by_metric.items()))))
    mem = [m for m in metrics if m in PEAK_MEMORY]
    if mem:
        parts.append(and_(Sample.stat == "peak", Sample.metric.in_(mem)))
    tree = _is_tree()
    phase = and_(~tree, Cell.server_cpu_window == "phase")
    cost = [m for m in metrics if m in CPU_COST]
    if cost:
        parts.append(and_(Sample.stat == "value", Sample.metric.in_(cost), _is_span()))
    cost_tree = [m.removesuffix(TREE_SUFFIX) for m in metrics if m in CPU_COST_TREE]
    if cost_tree:
        parts.append(and_(Sample.stat == "value", Sample.metric.in_(cost_tree), tree))
    cost_phase = [m.removesuffix(PHASE_SUFFIX) for m in metrics if m in CPU_COST_PHASE]
    if cost_phase:
        parts.append(and_(Sample.stat == "value", Sample.metric.in_(cost_phase), phase))
    if CAPACITY in metrics:
        parts.append(and_(Sample.stat == "users", Sample.metric == CAPACITY))
    return or_(*parts)


def _is_tree():
    """SQL condition: the cell's server CPU is a process-tree figure."""
    return func.coalesce(Cell.server_cpu_source, "") == "tree"


def _is_span():
    """SQL condition: the cell's server CPU is a cgroup figure (or of unknown source) over
    the measured span (or of unknown window): the plain :data:`CPU_COST` series."""
    return and_(~_is_tree(), func.coalesce(Cell.server_cpu_window, "") != "phase")


def points_select(*where):
    """SELECT of the points of the ``done`` cells matching ``where`` (SQL conditions on
    ``cell``), one row per point, columns in the order of :data:`POINT_COLUMNS`: the
    aggregation of ``sample`` that ``series_point`` stores."""
    track = track_expr()
    metric = case((and_(Sample.metric.in_(CPU_COST), _is_tree()), Sample.metric + TREE_SUFFIX),
                  (and_(Sample.metric.in_(CPU_COST), ~_is_span()), Sample.metric + PHASE_SUFFIX),
                  (Sample.metric.in_(PEAK_MEMORY + CPU_COST + (CAPACITY,)), Sample.metric), else_=literal(PRIMARY))
    pkey = case((Sample.metric == CAPACITY, search_key_expr(Cell.params_key)), else_=Cell.params_key)
    values = func.array_agg(aggregate_order_by(Sample.value, Cell.seq, Sample.id))
    # a search may end on a failed step: its answer is a figure all the same
    counted = or_(Cell.status == "done", Sample.metric == CAPACITY)
    return (select(Cell.campaign_id, Cell.server, track, Cell.workload, pkey, metric,
                   Cell.server_version, func.min(Cell.seq), func.min(Cell.server_label),
                   func.max(Environment.env_class), values)
            .join(Sample, Sample.cell_id == Cell.id)
            .outerjoin(Environment, Environment.id == Cell.environment_id)
            .where(counted, Cell.profiled.is_(False), figure_filter(), *where)
            .group_by(Cell.campaign_id, Cell.server, track, Cell.workload, pkey, metric,
                      Cell.server_version))


#: Columns of ``series_point`` filled by :func:`points_select`, in its order.
POINT_COLUMNS = ("campaign_id", "server", "track", "workload", "params_key", "metric", "version", "seq", "label",
                 "env_class", "samples")


def refresh_points(session: Session, *, cell: Cell) -> int:
    """Recompute the points of ``cell``'s group (same campaign, server, track, workload,
    params_key and server version; every series metric) from the stored samples:
    delete them and insert what :func:`points_select` gives. Takes the campaign's row
    lock first (``SELECT ... FOR UPDATE``; held until the caller commits), so concurrent
    refreshes of one campaign run in turn. Does not commit. Returns the number of
    points written (0 when the group has no done cell with a figure).

    Raises LookupError when the cell is not in the database (not flushed, or deleted)."""
    session.flush()
    session.execute(select(Campaign.id).where(Campaign.id == cell.campaign_id).with_for_update())
    key = session.execute(select(Cell.campaign_id, Cell.server, track_expr(), Cell.workload, Cell.params_key,
                                 Cell.server_version).where(Cell.id == cell.id)).first()
    if key is None:
        raise LookupError(f"cell {cell.id} is not stored: flush it before refreshing its points")
    cid, server, track, workload, pkey, version = key
    session.execute(delete(SeriesPoint).where(
        SeriesPoint.campaign_id == cid, SeriesPoint.server == server, SeriesPoint.track == track,
        SeriesPoint.workload == workload, SeriesPoint.version == version,
        or_(SeriesPoint.params_key == pkey,
            and_(SeriesPoint.metric == CAPACITY, SeriesPoint.params_key == search_key_expr(literal(pkey))))))
    return _insert(session, points_select(Cell.campaign_id == cid, Cell.server == server, track_expr() == track,
                                          Cell.workload == workload, Cell.params_key == pkey,
                                          Cell.server_version == version))


def _insert(session: Session, points) -> int:
    """INSERT the rows of ``points`` (a :func:`points_select`) into series_point; returns how many."""
    stmt = insert(SeriesPoint).from_select(list(POINT_COLUMNS), points).execution_options(preserve_rowcount=True)
    return int(session.connection().execute(stmt).rowcount)


def rebuild_points(session: Session) -> int:
    """Recompute every point from the stored samples (delete all, insert all). Takes
    a SHARE ROW EXCLUSIVE lock on ``series_point`` so no cell finishes meanwhile
    (finish_cell waits). Does not commit. Returns the number of points written."""
    session.execute(text("LOCK TABLE series_point IN SHARE ROW EXCLUSIVE MODE"))
    session.execute(delete(SeriesPoint))
    return _insert(session, points_select())
