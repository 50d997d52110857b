"""bisect_job: the range's commits in repository order, the campaign in flight, cancelling

Revision ID: 0012
Revises: 0011

``commits``: every commit of the bisected range in the repository's order, oldest first
(the good end first, the bad end last; runner.campaign.bisect.repo_order), computed once
when the bisect starts: the x-axis of the result page's chart. ``campaign_id``: the
campaign the worker is running for the current step (None between steps), the one a
cancel stops. ``status`` may now be ``cancelled`` (runner.campaign.bisect_job.cancel).
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("bisect_job", sa.Column("commits", postgresql.JSONB(astext_type=sa.Text()), nullable=True))
    op.add_column("bisect_job", sa.Column("campaign_id", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("bisect_job", "campaign_id")
    op.drop_column("bisect_job", "commits")
