"""cell.server_cpu_window: what a cell's server CPU figures span

Revision ID: 0010
Revises: 0009

``span``: the server's counters read at the ends of the phase's measured span
(runner.cell.server_cpu.SpanWatch), so the untimed set-up (logging in the idle or
concurrent sessions, placing fixtures) and teardown (DELE, QUIT) are not charged to the
figure. ``phase``: read at the ends of the whole phase, set-up and teardown included:
every cell stored before this revision, and drivers that do not mark their measured
span (docs/methodology.md, "What server CPU counts"). NULL: no server CPU measured.

Every cell stored before this revision that has server CPU rows is marked ``phase`` and
keeps its figures; its history points of server CPU per unit of work (those not already
in the process-tree series) move to the whole-phase series (``server_cpu_per_gib_phase``,
``server_cpu_per_op_phase``: runner.store.points.CPU_COST_PHASE), so a history never
compares a span figure with one that counts 300 logins of set-up.
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

MARK_PHASE = "UPDATE cell SET server_cpu_window = 'phase' WHERE server_cpu_source IS NOT NULL"

# The series metrics as runner.store.points had them at this revision.
_COST = ("server_cpu_per_gib", "server_cpu_per_op")
_COST_IN = "(" + ", ".join(f"'{m}'" for m in _COST) + ")"
_PHASE_IN = "(" + ", ".join(f"'{m}_phase'" for m in _COST) + ")"
MOVE_POINTS = f"UPDATE series_point SET metric = metric || '_phase' WHERE metric IN {_COST_IN}"
UNMOVE_POINTS = f"UPDATE series_point SET metric = left(metric, -6) WHERE metric IN {_PHASE_IN}"


def upgrade() -> None:
    op.add_column("cell", sa.Column("server_cpu_window", sa.String(length=8), nullable=True))
    op.execute(MARK_PHASE)
    op.execute(MOVE_POINTS)


def downgrade() -> None:
    op.execute(UNMOVE_POINTS)
    op.drop_column("cell", "server_cpu_window")
