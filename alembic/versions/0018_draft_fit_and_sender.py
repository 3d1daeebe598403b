"""draft fit and sender: a draft says whether the graph's facts answer its prospect's pains (`fit`, `fit_reason`); a
batch keeps who signs its emails (`sender`) and whether it drafts low fits (`skip_low_fit`); a graph keeps its
document's `sender` and `offers`.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28 07:00:00
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0018'
down_revision: Union[str, Sequence[str], None] = '0017'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    with op.batch_alter_table('graphs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sender', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('offers', sa.JSON(), nullable=True))
    with op.batch_alter_table('draft_batches', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sender', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('skip_low_fit', sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table('drafts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('fit', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('fit_reason', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('drafts', schema=None) as batch_op:
        batch_op.drop_column('fit_reason')
        batch_op.drop_column('fit')
    with op.batch_alter_table('draft_batches', schema=None) as batch_op:
        batch_op.drop_column('skip_low_fit')
        batch_op.drop_column('sender')
    with op.batch_alter_table('graphs', schema=None) as batch_op:
        batch_op.drop_column('offers')
        batch_op.drop_column('sender')
