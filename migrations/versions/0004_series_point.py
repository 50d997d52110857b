"""series_point: the history points, kept at store time and filled from the stored samples

Revision ID: 0004
Revises: 0003

One row per point of a history series (runner.history): the raw figures of the done
cells of one (campaign, server, track, workload, params_key, server version) for one
series metric (the workload's primary figure, peak memory, server CPU per unit of
work), in run order. runner.store.points.refresh_points keeps it from then on, in the
transaction that finishes each cell. The regressions API read these points by
aggregating every sample of the window on each request (docs/dashboard.md,
"Performance").

The backfill below is the aggregation of runner.store.points.points_select as of this
revision, written out (a migration must not change when the application code does);
tests/runner/store/test_points.py checks that it gives the same rows.
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# Workloads by primary metric, as runner.catalogue.workloads.WORKLOADS had them at this revision.
_THROUGHPUT = ("stor", "retr", "stor_idle", "retr_idle")
_ELAPSED = ("login", "retr_concurrent", "stor_concurrent", "quit")
_PEAK = ("server_mem_uss", "server_mem_rss_minus_shared")
_COST = ("server_cpu_per_gib", "server_cpu_per_op")


def _in(names: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{n}'" for n in names) + ")"


BACKFILL = f"""
INSERT INTO series_point (campaign_id, server, track, workload, params_key, metric, version, seq, label,
                          env_class, samples)
SELECT c.campaign_id, c.server, COALESCE(c.server_spec ->> 'label', c.variant::text), c.workload, c.params_key,
       CASE WHEN s.metric IN {_in(_PEAK + _COST)} THEN s.metric ELSE '' END, c.server_version,
       min(c.seq), min(c.server_label), max(e.env_class), array_agg(s.value ORDER BY c.seq, s.id)
FROM cell c
JOIN sample s ON s.cell_id = c.id
LEFT JOIN environment e ON e.id = c.environment_id
WHERE c.status = 'done'
  AND ((s.stat = 'value' AND ((c.workload IN {_in(_THROUGHPUT)} AND s.metric = 'throughput')
                              OR (c.workload IN {_in(_ELAPSED)} AND s.metric = 'elapsed')))
       OR (s.stat = 'peak' AND s.metric IN {_in(_PEAK)})
       OR (s.stat = 'value' AND s.metric IN {_in(_COST)}))
GROUP BY c.campaign_id, c.server, COALESCE(c.server_spec ->> 'label', c.variant::text), c.workload, c.params_key,
         CASE WHEN s.metric IN {_in(_PEAK + _COST)} THEN s.metric ELSE '' END, c.server_version
"""


def upgrade() -> None:
    op.create_table(
        "series_point",
        sa.Column("id", sa.BigInteger(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("server", sa.String(length=40), nullable=False),
        sa.Column("track", sa.Text(), nullable=False),
        sa.Column("workload", sa.String(length=40), nullable=False),
        sa.Column("params_key", sa.String(length=400), nullable=False),
        sa.Column("metric", sa.String(length=40), nullable=False),
        sa.Column("version", sa.String(length=60), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=False),
        sa.Column("env_class", sa.String(length=16), nullable=True),
        sa.Column("samples", postgresql.ARRAY(sa.Float()), nullable=False),
        sa.ForeignKeyConstraint(["campaign_id"], ["campaign.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("server", "workload", "params_key", "track", "metric", "campaign_id", "version",
                            name="uq_series_point"),
    )
    op.create_index("ix_series_point_campaign", "series_point", ["campaign_id", "metric"], unique=False)
    op.execute(BACKFILL)
    op.execute("ANALYZE series_point")


def downgrade() -> None:
    op.drop_index("ix_series_point_campaign", table_name="series_point")
    op.drop_table("series_point")
