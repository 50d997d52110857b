"""cell.server_cpu_source: where a cell's server CPU figures came from

Revision ID: 0005
Revises: 0004

``cgroup``: the server's cgroup counters (the container's ``cpu.stat`` under docker, the
cgroup v2 the lab makes for a local server), every process counted, exited ones
included, in microseconds. ``tree``: the sum over the server's live process tree, in
clock ticks, which misses the CPU of processes that exit unwaited-for or between its two
readings (docs/methodology.md, "What server CPU counts"). NULL: no server CPU measured.

Every cell stored before this revision that has server CPU rows took them from the
process tree: they are marked ``tree`` here and keep their figures, and their history
points of server CPU per unit of work move to the process-tree series
(``server_cpu_per_gib_tree``, ``server_cpu_per_op_tree``: runner.store.points.CPU_COST_TREE),
so a history never compares a process-tree figure with a cgroup one.
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

MARK_TREE = """
UPDATE cell SET server_cpu_source = 'tree'
WHERE EXISTS (SELECT 1 FROM sample s WHERE s.cell_id = cell.id AND s.metric = 'server_cpu')
"""


# The series metrics as runner.store.points had them at this revision.
_COST = ("server_cpu_per_gib", "server_cpu_per_op")
_COST_IN = "(" + ", ".join(f"'{m}'" for m in _COST) + ")"
MOVE_POINTS = f"UPDATE series_point SET metric = metric || '_tree' WHERE metric IN {_COST_IN}"
UNMOVE_POINTS = f"UPDATE series_point SET metric = left(metric, -5) WHERE metric IN {tuple(m + '_tree' for m in _COST)}"


def upgrade() -> None:
    op.add_column("cell", sa.Column("server_cpu_source", sa.String(length=12), nullable=True))
    op.execute(MARK_TREE)
    op.execute(MOVE_POINTS)


def downgrade() -> None:
    op.execute(UNMOVE_POINTS)
    op.drop_column("cell", "server_cpu_source")
