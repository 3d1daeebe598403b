"""workers: each run worker's heartbeat, for taking over the runs of a dead one

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 06:10:00

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0003'
down_revision: Union[str, Sequence[str], None] = '0002'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        'workers',
        sa.Column('executor_id', sa.String(length=200), nullable=False),
        sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('executor_id', name=op.f('pk_workers')),
    )


def downgrade() -> None:
    op.drop_table('workers')
