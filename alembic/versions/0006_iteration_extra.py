"""iteration extra: the fields of an iteration record that have no column of their own, so a new
field needs no migration

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 21:15:00

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('iterations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('extra', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('iterations', schema=None) as batch_op:
        batch_op.drop_column('extra')
