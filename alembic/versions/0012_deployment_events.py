"""deployment events: what triggered each deployment (a request or auto-promotion), whether it was a rollback, and the
event that announced it on the promoted policy's run

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 09:00:00
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0012'
down_revision: Union[str, Sequence[str], None] = '0011'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('trigger', sa.String(length=16), nullable=False, server_default='request'))
        batch_op.add_column(sa.Column('rollback', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column('event_id', sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.drop_column('event_id')
        batch_op.drop_column('rollback')
        batch_op.drop_column('trigger')
