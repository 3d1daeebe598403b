"""policies, deployments, drafts, evaluations: each graph's deployed champion, its challengers and its history; draft
batches and their drafts (each with the policy drawn for it and its propensity); the refs of drafts (their batch and
prospect); evaluations of policies; the lessons a run started from a policy continues with

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 08:30:00
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0011'
down_revision: Union[str, Sequence[str], None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table('deployments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('graph_id', sa.String(length=200), nullable=False),
    sa.Column('tenant', sa.String(length=100), nullable=False),
    sa.Column('run_id', sa.String(length=40), nullable=False),
    sa.Column('iteration', sa.Integer(), nullable=False),
    sa.Column('challengers', sa.JSON(), nullable=False),
    sa.Column('traffic', sa.String(length=8), nullable=False),
    sa.Column('floor', sa.Double(), nullable=False),
    sa.Column('min_sends', sa.Integer(), nullable=False),
    sa.Column('auto_promote', sa.Boolean(), nullable=False),
    sa.Column('require_evidence', sa.Boolean(), nullable=False),
    sa.Column('forced', sa.Boolean(), nullable=False),
    sa.Column('evaluation_id', sa.String(length=40), nullable=True),
    sa.Column('deployed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['graph_id'], ['graphs.id'], name=op.f('fk_deployments_graph_id_graphs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deployments'))
    )
    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.create_index('ix_deployments_graph', ['graph_id', 'id'], unique=False)
        batch_op.create_index('ix_deployments_run', ['run_id'], unique=False)

    op.create_table('evaluations',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('tenant', sa.String(length=100), nullable=False),
    sa.Column('graph_id', sa.String(length=200), nullable=False),
    sa.Column('policies', sa.JSON(), nullable=False),
    sa.Column('prospects', sa.JSON(), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('error', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['graph_id'], ['graphs.id'], name=op.f('fk_evaluations_graph_id_graphs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_evaluations'))
    )
    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.create_index('ix_evaluations_graph', ['tenant', 'graph_id', 'created_at'], unique=False)

    op.create_table('draft_batches',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('tenant', sa.String(length=100), nullable=False),
    sa.Column('graph_id', sa.String(length=200), nullable=False),
    sa.Column('run_id', sa.String(length=40), nullable=False),
    sa.Column('iteration', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('count', sa.Integer(), nullable=False),
    sa.Column('arms', sa.JSON(), nullable=False),
    sa.Column('completed', sa.Integer(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('webhook_url', sa.Text(), nullable=True),
    sa.Column('webhook_secret', sa.Text(), nullable=True),
    sa.Column('idempotency_key', sa.String(length=255), nullable=True),
    sa.Column('request_hash', sa.String(length=64), nullable=True),
    sa.Column('error', sa.JSON(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_draft_batches_run_id_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_draft_batches')),
    sa.UniqueConstraint('tenant', 'idempotency_key', name=op.f('uq_draft_batches_tenant'))
    )
    with op.batch_alter_table('draft_batches', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_draft_batches_run_id'), ['run_id'], unique=False)

    op.create_table('drafts',
    sa.Column('batch_id', sa.String(length=40), nullable=False),
    sa.Column('position', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('prospect', sa.JSON(), nullable=False),
    sa.Column('run_id', sa.String(length=40), nullable=False),
    sa.Column('iteration', sa.Integer(), nullable=False),
    sa.Column('like', sa.String(length=200), nullable=True),
    sa.Column('email', sa.JSON(), nullable=True),
    sa.Column('judge_score', sa.Double(), nullable=True),
    sa.Column('variant', sa.Integer(), nullable=False),
    sa.Column('propensity', sa.Double(), nullable=False),
    sa.Column('drafted_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['batch_id'], ['draft_batches.id'], name=op.f('fk_drafts_batch_id_draft_batches'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('batch_id', 'position', name=op.f('pk_drafts'))
    )
    with op.batch_alter_table('email_refs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('draft_batch_id', sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column('prospect_id', sa.String(length=200), nullable=True))
        batch_op.create_index(batch_op.f('ix_email_refs_draft_batch_id'), ['draft_batch_id'], unique=False)

    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('initial_context', sa.JSON(), nullable=True))



def downgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_column('initial_context')

    with op.batch_alter_table('email_refs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_email_refs_draft_batch_id'))
        batch_op.drop_column('prospect_id')
        batch_op.drop_column('draft_batch_id')

    op.drop_table('drafts')
    with op.batch_alter_table('draft_batches', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_draft_batches_run_id'))

    op.drop_table('draft_batches')
    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.drop_index('ix_evaluations_graph')

    op.drop_table('evaluations')
    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.drop_index('ix_deployments_run')
        batch_op.drop_index('ix_deployments_graph')

    op.drop_table('deployments')
