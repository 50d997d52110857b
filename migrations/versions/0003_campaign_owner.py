"""campaign.owner: the foreground process running a campaign (host:pid), or NULL when
it is queued for workers

Revision ID: 0003
Revises: 0002

``xferlab run`` executes its campaign in the foreground and sets ``owner``; workers
(``xferlab worker``) claim cells only of campaigns without an owner (queued from the
dashboard or the API), so a running worker never takes cells of a CLI campaign and
two cells never run at once on one machine.
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("campaign", sa.Column("owner", sa.String(length=200), nullable=True))


def downgrade() -> None:
    op.drop_column("campaign", "owner")
