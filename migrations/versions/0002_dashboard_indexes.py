"""dashboard indexes: history series lookup and index-only reads of sample values

Revision ID: 0002
Revises: 0001

* ``ix_cell_history``: the history API selects the done cells of one series
  (server, workload, params_key, track) where track is the spec's label, else the
  variant as jsonb text (runner.history); a partial index on done cells with the
  track expression finds them without rechecking other tracks' rows.
* ``ix_sample_cell_metric_value``: (cell_id, metric, stat) INCLUDE (value), so the
  history, comparison and regression queries read sample values with index-only
  scans instead of visiting heap rows (which carry the raw JSON).
"""
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS ix_cell_history ON cell "
               "(server, workload, params_key, (COALESCE(server_spec ->> 'label', variant::text))) "
               "WHERE status = 'done'")
    op.execute("CREATE INDEX IF NOT EXISTS ix_sample_cell_metric_value ON sample (cell_id, metric, stat) "
               "INCLUDE (value)")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS ix_sample_cell_metric_value")
    op.execute("DROP INDEX IF EXISTS ix_cell_history")
