"""tenants: runs, uploaded graphs and idempotency keys belong to the tenant that created them;
webhook secrets are stored sealed (longer than the plaintext)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 06:45:00

Existing rows belong to the open tenant "public"; existing graphs stay shared.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0004'
down_revision: Union[str, Sequence[str], None] = '0003'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tenant', sa.String(length=100), server_default='public', nullable=False))
        batch_op.alter_column('webhook_secret', existing_type=sa.String(length=100), type_=sa.Text(), existing_nullable=True)
        batch_op.create_index('ix_runs_tenant_id', ['tenant', 'id'], unique=False)
    with op.batch_alter_table('graphs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tenant', sa.String(length=100), nullable=True))
    with op.batch_alter_table('idempotency_keys', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tenant', sa.String(length=100), server_default='public', nullable=False))
        batch_op.drop_constraint('pk_idempotency_keys', type_='primary')
        batch_op.create_primary_key('pk_idempotency_keys', ['tenant', 'key'])


def downgrade() -> None:
    with op.batch_alter_table('idempotency_keys', schema=None) as batch_op:
        batch_op.drop_constraint('pk_idempotency_keys', type_='primary')
        batch_op.create_primary_key('pk_idempotency_keys', ['key'])
        batch_op.drop_column('tenant')
    with op.batch_alter_table('graphs', schema=None) as batch_op:
        batch_op.drop_column('tenant')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index('ix_runs_tenant_id')
        batch_op.alter_column('webhook_secret', existing_type=sa.Text(), type_=sa.String(length=100), existing_nullable=True)
        batch_op.drop_column('tenant')
