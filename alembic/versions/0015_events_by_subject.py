"""events by subject: an event belongs to a run, a graph (the tenant's deployment on it) or a draft batch, with a seq per
subject; each webhook delivery carries its receiver's sealed secret, so one relay delivers every subject's webhooks;
a deployment has a receiver of the graph's events. A run's policy.promoted and policy.rolled_back events move to the
graph they were promoted on.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28 05:00:00
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0015'
down_revision: Union[str, Sequence[str], None] = '0014'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

PROMOTIONS = ('policy.promoted', 'policy.rolled_back')


def upgrade() -> None:
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tenant', sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column('subject_kind', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('subject_id', sa.String(length=200), nullable=True))
    op.execute("UPDATE events SET subject_kind = 'run', subject_id = run_id, "
               "tenant = (SELECT runs.tenant FROM runs WHERE runs.id = events.run_id)")
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_constraint('uq_events_run_seq', type_='unique')
        batch_op.drop_constraint('fk_events_run_id_runs', type_='foreignkey')
        batch_op.drop_column('run_id')
        batch_op.alter_column('tenant', existing_type=sa.String(length=100), nullable=False)
        batch_op.alter_column('subject_kind', existing_type=sa.String(length=16), nullable=False)
        batch_op.alter_column('subject_id', existing_type=sa.String(length=200), nullable=False)
        batch_op.create_unique_constraint('uq_events_subject_seq', ['tenant', 'subject_kind', 'subject_id', 'seq'])
    _promotions_to_their_graphs()

    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tenant', sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column('subject_kind', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('subject_id', sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column('secret', sa.Text(), nullable=True))
    op.execute("UPDATE webhook_deliveries SET "
               "tenant = (SELECT events.tenant FROM events WHERE events.id = webhook_deliveries.event_id), "
               "subject_kind = (SELECT events.subject_kind FROM events WHERE events.id = webhook_deliveries.event_id), "
               "subject_id = (SELECT events.subject_id FROM events WHERE events.id = webhook_deliveries.event_id), "
               "secret = (SELECT runs.webhook_secret FROM runs WHERE runs.id = webhook_deliveries.run_id)")
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index('ix_webhook_deliveries_run')
        batch_op.drop_constraint('fk_webhook_deliveries_run_id_runs', type_='foreignkey')
        batch_op.drop_column('run_id')
        batch_op.alter_column('tenant', existing_type=sa.String(length=100), nullable=False)
        batch_op.alter_column('subject_kind', existing_type=sa.String(length=16), nullable=False)
        batch_op.alter_column('subject_id', existing_type=sa.String(length=200), nullable=False)
        batch_op.alter_column('secret', existing_type=sa.Text(), nullable=False)
        batch_op.create_index('ix_webhook_deliveries_subject', ['tenant', 'subject_kind', 'subject_id', 'created_at'],
                              unique=False)
    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('webhook_url', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('webhook_secret', sa.Text(), nullable=True))


def _promotions_to_their_graphs() -> None:
    """Each promotion, in the order it happened, becomes the next event of its tenant's graph; its data names the graph
    and its new seq instead of the run."""
    connection = op.get_bind()
    events = sa.table('events', sa.column('id', sa.String), sa.column('tenant', sa.String),
                      sa.column('subject_kind', sa.String), sa.column('subject_id', sa.String),
                      sa.column('seq', sa.Integer), sa.column('type', sa.String), sa.column('data', sa.JSON),
                      sa.column('created_at', sa.DateTime))
    rows = connection.execute(sa.select(events.c.id, events.c.tenant, events.c.data)
                              .where(events.c.type.in_(PROMOTIONS)).order_by(events.c.created_at, events.c.id)).all()
    seqs: dict[tuple[str, str], int] = {}
    for event_id, tenant, data in rows:
        graph_id = data['graph_id']
        seq = seqs[tenant, graph_id] = seqs.get((tenant, graph_id), 0) + 1
        moved = {'graph_id': graph_id, 'seq': seq} | {k: v for k, v in data.items() if k not in ('run_id', 'graph_id', 'seq')}
        connection.execute(sa.update(events).where(events.c.id == event_id).values(
            subject_kind='graph', subject_id=graph_id, seq=seq, data=moved))


def downgrade() -> None:
    """Back to run events: a graph's and a batch's events (and their deliveries) have no run to go to and are dropped."""
    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.drop_column('webhook_secret')
        batch_op.drop_column('webhook_url')
    op.execute("DELETE FROM events WHERE subject_kind <> 'run'")
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('run_id', sa.String(length=40), nullable=True))
    op.execute("UPDATE events SET run_id = subject_id")
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_constraint('uq_events_subject_seq', type_='unique')
        batch_op.alter_column('run_id', existing_type=sa.String(length=40), nullable=False)
        batch_op.create_foreign_key('fk_events_run_id_runs', 'runs', ['run_id'], ['id'], ondelete='CASCADE')
        batch_op.create_unique_constraint('uq_events_run_seq', ['run_id', 'seq'])
        batch_op.drop_column('subject_id')
        batch_op.drop_column('subject_kind')
        batch_op.drop_column('tenant')
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('run_id', sa.String(length=40), nullable=True))
    op.execute("UPDATE webhook_deliveries SET run_id = subject_id")
    with op.batch_alter_table('webhook_deliveries', schema=None) as batch_op:
        batch_op.drop_index('ix_webhook_deliveries_subject')
        batch_op.alter_column('run_id', existing_type=sa.String(length=40), nullable=False)
        batch_op.create_foreign_key('fk_webhook_deliveries_run_id_runs', 'runs', ['run_id'], ['id'], ondelete='CASCADE')
        batch_op.create_index('ix_webhook_deliveries_run', ['run_id', 'created_at'], unique=False)
        batch_op.drop_column('secret')
        batch_op.drop_column('subject_id')
        batch_op.drop_column('subject_kind')
        batch_op.drop_column('tenant')
