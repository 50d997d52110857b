"""bisect_job: a bisect queued from the dashboard, its progress, steps and answer

Revision ID: 0009
Revises: 0008

One row per bisect queued by the dashboard's bisect form; a worker claims it
(``SELECT ... FOR UPDATE SKIP LOCKED``) and runs runner.campaign.bisect.Bisector, each step
a stored campaign; the row keeps the request, the progress lines, the steps as they are
measured and the first bad commit (runner/campaign/bisect_job.py).
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "bisect_job",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=True),
        sa.Column("request", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("steps", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("log", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("commits_left", sa.Integer(), nullable=True),
        sa.Column("steps_left", sa.Integer(), nullable=True),
        sa.Column("first_bad", sa.String(length=40), nullable=True),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("confirmed", sa.Boolean(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_bisect_job_status", "bisect_job", ["status"])


def downgrade() -> None:
    op.drop_index("ix_bisect_job_status", table_name="bisect_job")
    op.drop_table("bisect_job")
