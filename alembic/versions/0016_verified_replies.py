"""verified replies, and prospect text as data: a reply counts only from an address its email went to. Outcome rows gain `verified` and the keyed
hash of their recipient's domain; a draft's ref gains the keyed hashes of its prospect's address and domain. Replies
stored before are verified by the rule that needs no address: their recipient had another event of the same email (a
delivery, an open, a bounce…); the rest become unverified (shown, never counted). A draft records what was removed from its prospect's fields.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28 07:00:00
"""
from typing import Sequence, Union

import sqlalchemy as sa

from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0016'
down_revision: Union[str, Sequence[str], None] = '0015'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

REPLIES = "('replied', 'auto_replied')"


def upgrade() -> None:
    with op.batch_alter_table('outcome_events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('recipient_domain', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('verified', sa.Boolean(), server_default=sa.true(), nullable=False))
    with op.batch_alter_table('email_refs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('recipient', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('recipient_domain', sa.String(length=64), nullable=True))
    with op.batch_alter_table('drafts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sanitized', sa.JSON(), nullable=True))
    op.execute(
        f"UPDATE outcome_events SET verified = false WHERE type IN {REPLIES} AND NOT EXISTS ("
        f"SELECT 1 FROM outcome_events AS sent WHERE sent.tenant = outcome_events.tenant "
        f"AND sent.ref = outcome_events.ref AND sent.recipient = outcome_events.recipient AND sent.type NOT IN {REPLIES})")


def downgrade() -> None:
    with op.batch_alter_table('drafts', schema=None) as batch_op:
        batch_op.drop_column('sanitized')
    with op.batch_alter_table('email_refs', schema=None) as batch_op:
        batch_op.drop_column('recipient_domain')
        batch_op.drop_column('recipient')
    with op.batch_alter_table('outcome_events', schema=None) as batch_op:
        batch_op.drop_column('verified')
        batch_op.drop_column('recipient_domain')
