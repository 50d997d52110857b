"""initial schema: campaign, cell, sample, server_build, environment

Revision ID: 0001
Revises: 
Create Date: 2026-11-22 02:57:20.918511
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('campaign',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('spec', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('backend', sa.String(length=20), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('cells_total', sa.Integer(), nullable=False),
    sa.Column('cells_done', sa.Integer(), nullable=False),
    sa.Column('cells_failed', sa.Integer(), nullable=False),
    sa.Column('cells_skipped', sa.Integer(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('lab_version', sa.String(length=40), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index(op.f('ix_campaign_status'), 'campaign', ['status'], unique=False)
    op.create_table('environment',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('env_class', sa.String(length=16), nullable=False),
    sa.Column('data', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('digest')
    )
    op.create_index(op.f('ix_environment_env_class'), 'environment', ['env_class'], unique=False)
    op.create_table('server_build',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=40), nullable=False),
    sa.Column('version', sa.String(length=60), nullable=False),
    sa.Column('variant', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('variant_key', sa.String(length=400), nullable=False),
    sa.Column('config_hash', sa.String(length=64), nullable=False),
    sa.Column('info', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('name', 'version', 'variant_key', 'config_hash')
    )
    op.create_table('cell',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('campaign_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('server', sa.String(length=40), nullable=False),
    sa.Column('server_version', sa.String(length=60), nullable=False),
    sa.Column('variant', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('server_label', sa.String(length=200), nullable=False),
    sa.Column('server_spec', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('workload', sa.String(length=40), nullable=False),
    sa.Column('params', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('params_key', sa.String(length=400), nullable=False),
    sa.Column('repeat', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('worker', sa.String(length=200), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('build_id', sa.Integer(), nullable=True),
    sa.Column('environment_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['build_id'], ['server_build.id'], ),
    sa.ForeignKeyConstraint(['campaign_id'], ['campaign.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['environment_id'], ['environment.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('campaign_id', 'seq')
    )
    op.create_index('ix_cell_campaign_status', 'cell', ['campaign_id', 'status'], unique=False)
    op.create_index('ix_cell_series', 'cell', ['server', 'workload', 'params_key'], unique=False)
    op.create_table('sample',
    sa.Column('id', sa.BigInteger(), nullable=False),
    sa.Column('cell_id', sa.Integer(), nullable=False),
    sa.Column('metric', sa.String(length=40), nullable=False),
    sa.Column('stat', sa.String(length=20), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('unit', sa.String(length=12), nullable=False),
    sa.Column('raw', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.ForeignKeyConstraint(['cell_id'], ['cell.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_sample_cell_metric', 'sample', ['cell_id', 'metric', 'stat'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_sample_cell_metric', table_name='sample')
    op.drop_table('sample')
    op.drop_index('ix_cell_series', table_name='cell')
    op.drop_index('ix_cell_campaign_status', table_name='cell')
    op.drop_table('cell')
    op.drop_table('server_build')
    op.drop_index(op.f('ix_environment_env_class'), table_name='environment')
    op.drop_table('environment')
    op.drop_index(op.f('ix_campaign_status'), table_name='campaign')
    op.drop_table('campaign')
