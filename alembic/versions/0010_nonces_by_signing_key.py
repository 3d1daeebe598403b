"""nonces by signing key: a Mailgun token is used once per signing key (a keyed hash of it), not once per source

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 08:00:00

The table is made anew: a token is only ever accepted within 5 minutes of its signed timestamp, so the tokens of the
old table matter for at most 5 minutes, and their signing key cannot be hashed here (that needs SECRET_KEY). A
replayed request within those minutes that repeats an event still counts it once, by the event's id.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision: str = '0010'
down_revision: Union[str, Sequence[str], None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.drop_table('outcome_nonces')
    op.create_table('outcome_nonces',
    sa.Column('signing_key', sa.String(length=64), nullable=False),
    sa.Column('nonce', sa.String(length=200), nullable=False),
    sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('signing_key', 'nonce', name=op.f('pk_outcome_nonces'))
    )


def downgrade() -> None:
    op.drop_table('outcome_nonces')
    op.create_table('outcome_nonces',
    sa.Column('source_id', sa.String(length=40), nullable=False),
    sa.Column('nonce', sa.String(length=200), nullable=False),
    sa.Column('seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['source_id'], ['outcome_sources.id'], name=op.f('fk_outcome_nonces_source_id_outcome_sources'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('source_id', 'nonce', name=op.f('pk_outcome_nonces'))
    )
