"""cell.profiled: the extra repeat of a cell family that runs under the profilers

Revision ID: 0007
Revises: 0006

A spec, workload or server entry with ``profile:`` adds one cell per cell family, after
its measured repeats, that runs under the profilers (runner.spec.model.expand). Its
figures are stored as any cell's but stay out of the primary figures (the campaign
tables, history points, adaptive repeats): the profilers cost the server time.
Every cell stored before is unprofiled.
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("cell", sa.Column("profiled", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    op.drop_column("cell", "profiled")
