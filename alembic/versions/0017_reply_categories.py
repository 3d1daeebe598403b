"""reply categories and suppression: each reply (and each provider's unsubscribe, complaint or bounce) stores what it
meant (category, confidence, who decided, why, a stated return date); a tenant's suppression list, by the keyed hash
recipients are stored as; a draft says when its prospect was suppressed.

Outcomes stored before this revision get the category their type and sentiment said: a reply with a positive sentiment
`interested`, a negative one `not_interested`, any other `unknown` (confidence 0); an auto-reply `auto_reply`; an
unsubscribe or a complaint `unsubscribe`, a bounce `bounce` (decided by the provider when a provider reported it, else
by the caller). Their recipients are suppressed, from the first such event.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28 07:00:00
"""
from typing import Sequence, Union

import sqlalchemy as sa

from alembic import op
from app.kit.db import UTCDateTime

# revision identifiers, used by Alembic.
revision: str = '0017'
down_revision: Union[str, Sequence[str], None] = '0016'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

SENDER = "CASE WHEN source_id IS NULL THEN 'caller' ELSE 'provider' END"
CARRIED = [
    ("type = 'replied' AND sentiment = 'positive'", "'interested'", "1.0", "'caller'", "'sentiment positive'"),
    ("type = 'replied' AND sentiment = 'negative'", "'not_interested'", "1.0", "'caller'", "'sentiment negative'"),
    ("type = 'replied' AND (sentiment IS NULL OR sentiment = 'neutral')", "'unknown'", "0.0", "'rules'",
     "'received before replies were classified'"),
    ("type = 'auto_replied'", "'auto_reply'", "1.0", "'rules'", "'an auto-reply by its headers'"),
    ("type = 'unsubscribed'", "'unsubscribe'", "1.0", SENDER, "'unsubscribed'"),
    ("type = 'complained'", "'unsubscribe'", "1.0", SENDER, "'complaint (marked as spam)'"),
    ("type = 'bounced'", "'bounce'", "1.0", SENDER, "'hard bounce'"),
]


def upgrade() -> None:
    with op.batch_alter_table('outcome_events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('category', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('confidence', sa.Double(), nullable=True))
        batch_op.add_column(sa.Column('decided_by', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('reason', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('returns_on', sa.Date(), nullable=True))
    for where, category, confidence, decided_by, reason in CARRIED:
        op.execute(f"UPDATE outcome_events SET category = {category}, confidence = {confidence}, "
                   f"decided_by = {decided_by}, reason = {reason} WHERE {where}")
    op.create_table('suppressions',
    sa.Column('tenant', sa.String(length=100), nullable=False),
    sa.Column('recipient', sa.String(length=64), nullable=False),
    sa.Column('reason', sa.String(length=200), nullable=False),
    sa.Column('since', UTCDateTime(), nullable=False),
    sa.Column('until', sa.Date(), nullable=True),
    sa.PrimaryKeyConstraint('tenant', 'recipient', name=op.f('pk_suppressions'))
    )
    op.execute("INSERT INTO suppressions (tenant, recipient, reason, since, until) "
               "SELECT tenant, recipient, "
               "CASE MIN(type) WHEN 'bounced' THEN 'bounce' WHEN 'complained' THEN 'complaint' ELSE 'unsubscribe' END, "
               "MIN(occurred_at), NULL FROM outcome_events "
               "WHERE type IN ('unsubscribed', 'complained', 'bounced') GROUP BY tenant, recipient")
    with op.batch_alter_table('drafts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('suppressed', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('drafts', schema=None) as batch_op:
        batch_op.drop_column('suppressed')
    op.drop_table('suppressions')
    with op.batch_alter_table('outcome_events', schema=None) as batch_op:
        batch_op.drop_column('returns_on')
        batch_op.drop_column('reason')
        batch_op.drop_column('decided_by')
        batch_op.drop_column('confidence')
        batch_op.drop_column('category')
