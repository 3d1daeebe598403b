"""node scores per scenario; what each iteration distilled for the next one's prompts

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 09:00:00

A run's node scores (and their per-iteration changes) are kept per scenario: `scenario_id` joins
both primary keys. Rows of earlier runs keep `scenario_id` "", a run-wide score that applies to
every scenario of its run. `iterations.context` holds what in-context learning distilled (the
best email so far and a playbook of lessons, per scenario); null for runs without it.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


revision: str = '0002'
down_revision: Union[str, Sequence[str], None] = '0001'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

KEYS = {'node_scores': ['run_id', 'node_id'], 'node_score_changes': ['run_id', 'iteration', 'node_id']}


def upgrade() -> None:
    for table, key in KEYS.items():
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('scenario_id', sa.String(length=200), server_default='', nullable=False))
            batch_op.drop_constraint(f'pk_{table}', type_='primary')
            batch_op.create_primary_key(f'pk_{table}', [*key[:-1], 'scenario_id', key[-1]])
    with op.batch_alter_table('iterations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('context', sa.JSON(), nullable=True))


def downgrade() -> None:
    """Keeps one score per node: a run's per-scenario scores cannot be folded back into one."""
    with op.batch_alter_table('iterations', schema=None) as batch_op:
        batch_op.drop_column('context')
    for table, key in KEYS.items():
        op.execute(sa.text(f"DELETE FROM {table} WHERE scenario_id <> ''"))
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f'pk_{table}', type_='primary')
            batch_op.create_primary_key(f'pk_{table}', key)
            batch_op.drop_column('scenario_id')
