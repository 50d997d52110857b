"""noise_calibration: the noise floor and false-alarm rate of a series, from A/A runs

Revision ID: 0008
Revises: 0007

One row per (series, environment class) of one ``xferlab calibrate`` invocation: the same
build measured against itself in N campaigns, the runs' raw samples, the relative range
and coefficient of variation of their medians (the noise floor), and how many pairs of
runs the regression rule flagged (the false-alarm rate at the thresholds stored beside
it). runner.history.calibration writes and reads it; docs/methodology.md, "Noise
calibration", defines each figure.
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "noise_calibration",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("calibration", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("server", sa.String(length=40), nullable=False),
        sa.Column("track", sa.Text(), nullable=False),
        sa.Column("workload", sa.String(length=40), nullable=False),
        sa.Column("params_key", sa.String(length=400), nullable=False),
        sa.Column("metric", sa.String(length=40), nullable=False),
        sa.Column("figure", sa.String(length=40), nullable=False),
        sa.Column("unit", sa.String(length=12), nullable=False),
        sa.Column("env_class", sa.String(length=16), nullable=True),
        sa.Column("version", sa.String(length=60), nullable=False),
        sa.Column("commit", sa.String(length=40), nullable=True),
        sa.Column("campaign_ids", postgresql.ARRAY(sa.Integer()), nullable=False),
        sa.Column("runs_samples", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("noise_floor", sa.Float(), nullable=False),
        sa.Column("cv", sa.Float(), nullable=False),
        sa.Column("pairs", sa.Integer(), nullable=False),
        sa.Column("false_alarms", sa.Integer(), nullable=False),
        sa.Column("false_alarm_rate", sa.Float(), nullable=False),
        sa.Column("series_alarms", sa.Integer(), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("min_effect", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_noise_calibration_lookup", "noise_calibration", ["figure", "env_class"])


def downgrade() -> None:
    op.drop_index("ix_noise_calibration_lookup", table_name="noise_calibration")
    op.drop_table("noise_calibration")
