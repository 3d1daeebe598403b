"""policies of their own: a table of kept policies (a run's iteration, its checkpoint, node scores and lessons copied);
deployments, draft batches, drafts, drafts' refs and evaluations name them by id; draft batches, refs and outcomes no
longer go with a run

Every (run, iteration) a deployment (its champion or a challenger), a draft batch, a draft or an evaluation names is
kept as a policy, its snapshot read from the run's records, and the new policy-id columns are filled. A run deleted
before this revision left nothing to keep: the deployments and drafts that still name it get no policy id (null).
The model a remote backend's policy was trained from is read, as the service reads it, from ART_BASE_MODEL or
OPENAI_MODEL (else the default); its checkpoint's name from ART_MODEL_NAME.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 04:30:00
"""
import os
import secrets
import time
from datetime import UTC, datetime
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa

from app.kit.db import UTCDateTime


# revision identifiers, used by Alembic.
revision: str = '0014'
down_revision: Union[str, Sequence[str], None] = '0013'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

STORES_CHECKPOINTS = ("embedded",)  # backends whose checkpoints live in policy_checkpoints, as of this revision
FIXED_MODEL = ("openai",)  # backends that serve a fixed model and keep no checkpoint

runs = sa.table('runs', sa.column('id', sa.String), sa.column('tenant', sa.String), sa.column('graph_id', sa.String),
                sa.column('config', sa.JSON))
iterations = sa.table('iterations', sa.column('run_id', sa.String), sa.column('iteration', sa.Integer),
                      sa.column('rewards', sa.JSON), sa.column('training', sa.JSON), sa.column('context', sa.JSON),
                      sa.column('finished_at', UTCDateTime))
score_changes = sa.table('node_score_changes', sa.column('run_id', sa.String), sa.column('iteration', sa.Integer),
                         sa.column('scenario_id', sa.String), sa.column('node_id', sa.String), sa.column('score', sa.Float))
checkpoints = sa.table('policy_checkpoints', sa.column('model_name', sa.String), sa.column('step', sa.Integer),
                       sa.column('data', sa.LargeBinary), sa.column('metrics', sa.JSON),
                       sa.column('created_at', UTCDateTime))
policies = sa.table('policies', *(sa.column(name, kind) for name, kind in (
    ('id', sa.String), ('tenant', sa.String), ('graph_id', sa.String), ('name', sa.String), ('source', sa.String),
    ('run_id', sa.String), ('iteration', sa.Integer), ('backend', sa.String), ('base_model', sa.String),
    ('training_step', sa.Integer), ('checkpoint', sa.String), ('config', sa.JSON), ('node_scores', sa.JSON),
    ('lessons', sa.JSON), ('reward', sa.JSON), ('trained_at', UTCDateTime),
    ('created_at', UTCDateTime))))
deployments = sa.table('deployments', sa.column('id', sa.Integer), sa.column('run_id', sa.String),
                       sa.column('iteration', sa.Integer), sa.column('challengers', sa.JSON),
                       sa.column('policy_id', sa.String))
batches = sa.table('draft_batches', sa.column('id', sa.String), sa.column('run_id', sa.String),
                   sa.column('iteration', sa.Integer), sa.column('arms', sa.JSON), sa.column('policy_id', sa.String))
drafts = sa.table('drafts', sa.column('run_id', sa.String), sa.column('iteration', sa.Integer),
                  sa.column('policy_id', sa.String))
email_refs = sa.table('email_refs', sa.column('run_id', sa.String), sa.column('iteration', sa.Integer),
                      sa.column('draft_batch_id', sa.String), sa.column('policy_id', sa.String))
evaluations = sa.table('evaluations', sa.column('id', sa.String), sa.column('policies', sa.JSON),
                       sa.column('policy_ids', sa.JSON))


def _new_id() -> str:
    """As `app.events.service.new_id("pol")` makes them: sortable by creation time."""
    return f"pol_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"


def _alias(text: str) -> tuple[str, int] | None:
    run_id, _, iteration = text.rpartition("@")
    return (run_id, int(iteration)) if run_id and iteration.isdigit() else None


def _keep(bind, run_id: str, iteration: int) -> str | None:
    """The policy kept from the run's iteration k, as `app.runs.policies.keep` keeps one; None if the run is gone."""
    run = bind.execute(sa.select(runs).where(runs.c.id == run_id)).first()
    row = bind.execute(sa.select(iterations).where(iterations.c.run_id == run_id,
                                                   iterations.c.iteration == iteration)).first()
    if run is None or row is None:
        return None
    backend = run.config["backend"]
    step = None if backend in FIXED_MODEL else int((row.training or {}).get("step", 0))
    scores: dict = {}
    for scenario_id, node_id, score in bind.execute(
            sa.select(score_changes.c.scenario_id, score_changes.c.node_id, score_changes.c.score)
            .where(score_changes.c.run_id == run_id, score_changes.c.iteration <= iteration)
            .order_by(score_changes.c.iteration)):
        scores.setdefault(scenario_id, {})[node_id] = score
    policy_id = _new_id()
    prefix = os.environ.get("ART_MODEL_NAME", "model")
    checkpoint = None
    if step is not None and backend in STORES_CHECKPOINTS:
        stored = bind.execute(sa.select(checkpoints).where(checkpoints.c.model_name.like(f"%-{run_id}"),
                                                           checkpoints.c.step == step)).first()
        if stored is not None:
            prefix = stored.model_name[:-len(run_id) - 1]
        checkpoint = f"{prefix}-{policy_id}"
        if stored is not None:
            bind.execute(checkpoints.insert().values(model_name=checkpoint, step=step, data=stored.data, metrics={},
                                                     created_at=stored.created_at))
    elif step is not None:
        checkpoint = f"{prefix}-{run_id}"
    base_model = ("embedded" if backend == "embedded" else os.environ.get("OPENAI_MODEL", "") if backend in FIXED_MODEL
                  else os.environ.get("ART_BASE_MODEL", "Qwen/Qwen2.5-14B-Instruct"))
    bind.execute(policies.insert().values(
        id=policy_id, tenant=run.tenant, graph_id=run.graph_id, name=None, source=f"{run_id}@{iteration}", run_id=run_id,
        iteration=iteration, backend=backend, base_model=base_model, training_step=step, checkpoint=checkpoint,
        config=run.config, node_scores=scores, lessons=row.context, reward=row.rewards, trained_at=row.finished_at,
        created_at=datetime.now(UTC)))
    return policy_id


def _carry_over(bind) -> None:
    named: set[tuple[str, int]] = set()
    deployment_rows = bind.execute(sa.select(deployments)).all()
    batch_rows = bind.execute(sa.select(batches)).all()
    evaluation_rows = bind.execute(sa.select(evaluations)).all()
    for row in deployment_rows:
        named |= {(row.run_id, row.iteration), *((c["run_id"], c["iteration"]) for c in row.challengers or [])}
    for row in batch_rows:
        named |= {(row.run_id, row.iteration), *((a["run_id"], a["iteration"]) for a in row.arms or [])}
    named |= {tuple(pair) for pair in bind.execute(sa.select(drafts.c.run_id, drafts.c.iteration).distinct())}
    for row in evaluation_rows:
        named |= {pair for pair in map(_alias, row.policies or []) if pair}
    kept = {pair: _keep(bind, *pair) for pair in sorted(named)}

    def with_ids(arms: list | None) -> list:
        return [arm | {"policy_id": kept.get((arm["run_id"], arm["iteration"]))} for arm in arms or []]

    for row in deployment_rows:
        bind.execute(deployments.update().where(deployments.c.id == row.id).values(
            policy_id=kept.get((row.run_id, row.iteration)), challengers=with_ids(row.challengers)))
    for row in batch_rows:
        bind.execute(batches.update().where(batches.c.id == row.id).values(
            policy_id=kept[row.run_id, row.iteration], arms=with_ids(row.arms)))
    for row in evaluation_rows:
        bind.execute(evaluations.update().where(evaluations.c.id == row.id).values(
            policy_ids=[kept.get(_alias(text)) for text in row.policies or []]))
    for (run_id, iteration), policy_id in kept.items():
        if policy_id is None:
            continue
        bind.execute(drafts.update().where(drafts.c.run_id == run_id, drafts.c.iteration == iteration)
                     .values(policy_id=policy_id))
        bind.execute(email_refs.update().where(email_refs.c.run_id == run_id, email_refs.c.iteration == iteration,
                                               email_refs.c.draft_batch_id.is_not(None)).values(policy_id=policy_id))


def upgrade() -> None:
    op.create_table('policies',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('tenant', sa.String(length=100), nullable=False),
    sa.Column('graph_id', sa.String(length=200), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=True),
    sa.Column('source', sa.String(length=160), nullable=False),
    sa.Column('run_id', sa.String(length=40), nullable=False),
    sa.Column('iteration', sa.Integer(), nullable=False),
    sa.Column('backend', sa.String(length=40), nullable=False),
    sa.Column('base_model', sa.String(length=255), nullable=False),
    sa.Column('training_step', sa.Integer(), nullable=True),
    sa.Column('checkpoint', sa.String(length=255), nullable=True),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('node_scores', sa.JSON(), nullable=False),
    sa.Column('lessons', sa.JSON(), nullable=True),
    sa.Column('reward', sa.JSON(), nullable=True),
    sa.Column('trained_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_policies')),
    sa.UniqueConstraint('source', name=op.f('uq_policies_source'))
    )
    with op.batch_alter_table('policies', schema=None) as batch_op:
        batch_op.create_index('ix_policies_tenant_graph', ['tenant', 'graph_id', 'id'], unique=False)
    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('policy_id', sa.String(length=40), nullable=True))
    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.add_column(sa.Column('policy_ids', sa.JSON(), nullable=True))
    with op.batch_alter_table('draft_batches', schema=None) as batch_op:
        batch_op.add_column(sa.Column('policy_id', sa.String(length=40), nullable=True))
    with op.batch_alter_table('drafts', schema=None) as batch_op:
        batch_op.add_column(sa.Column('policy_id', sa.String(length=40), nullable=True))
    with op.batch_alter_table('email_refs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('policy_id', sa.String(length=40), nullable=True))

    _carry_over(op.get_bind())

    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_deployments_policy_id'), ['policy_id'], unique=False)
    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.alter_column('policy_ids', existing_type=sa.JSON(), nullable=False)
    with op.batch_alter_table('draft_batches', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_draft_batches_run_id_runs'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_draft_batches_run_id'))
        batch_op.alter_column('policy_id', existing_type=sa.String(length=40), nullable=False)
        batch_op.create_index(batch_op.f('ix_draft_batches_policy_id'), ['policy_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_draft_batches_policy_id_policies'), 'policies', ['policy_id'], ['id'],
                                    ondelete='CASCADE')
    with op.batch_alter_table('email_refs', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_email_refs_run_id_runs'), type_='foreignkey')
        batch_op.create_index(batch_op.f('ix_email_refs_policy_id'), ['policy_id'], unique=False)
    with op.batch_alter_table('outcome_events', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_outcome_events_run_id_runs'), type_='foreignkey')


def downgrade() -> None:
    """The policy-id columns and the policies table go; a draft batch, ref or outcome whose run was deleted since
    cannot go back under a foreign key to it and is deleted."""
    bind = op.get_bind()
    orphaned = sa.select(batches.c.id).where(batches.c.run_id.not_in(sa.select(runs.c.id)))
    bind.execute(sa.text("DELETE FROM drafts WHERE batch_id IN (SELECT id FROM draft_batches WHERE run_id NOT IN "
                         "(SELECT id FROM runs))"))
    bind.execute(batches.delete().where(batches.c.id.in_(orphaned)))
    bind.execute(sa.text("DELETE FROM outcome_events WHERE run_id NOT IN (SELECT id FROM runs)"))
    bind.execute(sa.text("DELETE FROM email_refs WHERE run_id NOT IN (SELECT id FROM runs)"))
    with op.batch_alter_table('outcome_events', schema=None) as batch_op:
        batch_op.create_foreign_key(batch_op.f('fk_outcome_events_run_id_runs'), 'runs', ['run_id'], ['id'],
                                    ondelete='CASCADE')
    with op.batch_alter_table('email_refs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_email_refs_policy_id'))
        batch_op.drop_column('policy_id')
        batch_op.create_foreign_key(batch_op.f('fk_email_refs_run_id_runs'), 'runs', ['run_id'], ['id'], ondelete='CASCADE')
    with op.batch_alter_table('drafts', schema=None) as batch_op:
        batch_op.drop_column('policy_id')
    with op.batch_alter_table('draft_batches', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_draft_batches_policy_id_policies'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_draft_batches_policy_id'))
        batch_op.drop_column('policy_id')
        batch_op.create_index(batch_op.f('ix_draft_batches_run_id'), ['run_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_draft_batches_run_id_runs'), 'runs', ['run_id'], ['id'],
                                    ondelete='CASCADE')
    with op.batch_alter_table('evaluations', schema=None) as batch_op:
        batch_op.drop_column('policy_ids')
    with op.batch_alter_table('deployments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_deployments_policy_id'))
        batch_op.drop_column('policy_id')
    bind.execute(sa.text("DELETE FROM policy_checkpoints WHERE model_name IN (SELECT checkpoint FROM policies "
                         "WHERE backend = 'embedded' AND checkpoint IS NOT NULL)"))
    with op.batch_alter_table('policies', schema=None) as batch_op:
        batch_op.drop_index('ix_policies_tenant_graph')
    op.drop_table('policies')
