"""cell_profile: the server's CPU profile over a profiled cell's measured phase

Revision ID: 0006
Revises: 0005

One row per profiled cell (runner.metrics.profile_data.ServerProfile as stored): the
profiler, its version and rate, the on-CPU folded stacks (lines ``frame;frame;... N``,
N in samples), the off-CPU folded stacks (N in microseconds) when the kernel allowed
them, the on-/off-CPU seconds, the syscall table and the notes of what the profile could
not see. The folded text sits in the row: a 3 s phase at 99 Hz makes a few thousand
samples at most, tens of KiB of text, which PostgreSQL compresses out of line (TOAST).
Deleting the cell deletes its profile.
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cell_profile",
        sa.Column("cell_id", sa.Integer(), nullable=False),
        sa.Column("profiler", sa.String(length=20), nullable=False),
        sa.Column("profiler_version", sa.String(length=80), nullable=False),
        sa.Column("rate_hz", sa.Integer(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=False),
        sa.Column("on_cpu", sa.Text(), nullable=False),
        sa.Column("off_cpu", sa.Text(), nullable=True),
        sa.Column("on_cpu_s", sa.Float(), nullable=False),
        sa.Column("off_cpu_s", sa.Float(), nullable=True),
        sa.Column("syscalls", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("notes", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.ForeignKeyConstraint(["cell_id"], ["cell.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("cell_id"),
    )


def downgrade() -> None:
    op.drop_table("cell_profile")
