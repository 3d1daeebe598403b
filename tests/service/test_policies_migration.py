"""Revision 0014 keeps, as policies of their own, every run iteration a deployment, a draft batch, a draft or an
evaluation names, with its snapshot and its checkpoint's copy, and fills their policy-id columns: tested from a
database made by revision 0013, on both databases."""

import json
from datetime import UTC, datetime

import sqlalchemy as sa

from alembic import command
from app.kit import migrations
from app.kit.db import driver_url

RUN, GONE = "run_0001", "run_gone"
NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
CONFIG = {"backend": "embedded", "scenario_ids": ["scn-a", "scn-b"], "judge": "default"}


def _table(table_name: str, /, **columns) -> sa.TableClause:
    return sa.table(table_name, *(sa.column(column, kind) for column, kind in columns.items()))


S, I, J, T, F, B = sa.String, sa.Integer, sa.JSON, sa.DateTime(timezone=True), sa.Float, sa.Boolean


def seed(connection) -> None:
    """A finished run of two recorded iterations, deployed (its @1 the champion, its @0 a challenger), drafted with
    (a batch of two drafts, one per policy, with refs and an outcome), evaluated; and a deployment in the history of
    a run deleted since."""
    insert = connection.execute
    insert(_table("graphs", id=S, name=S, created_at=T).insert().values(id="g", name="G", created_at=NOW))
    insert(_table("runs", id=S, tenant=S, status=S, graph_id=S, config=J, iterations_total=I, iterations_completed=I,
                  last_seq=I, attempt=I, created_at=T).insert().values(
        id=RUN, tenant="alice", status="succeeded", graph_id="g", config=CONFIG, iterations_total=1,
        iterations_completed=1, last_seq=0, attempt=1, created_at=NOW))
    iterations = _table("iterations", run_id=S, iteration=I, node_scores_changed=J, metrics=J, rewards=J, training=J,
                        context=J, started_at=T, finished_at=T)
    for k, training, context in ((0, None, None), (1, {"step": 1, "skipped": False}, {"scn-a": {"lessons": ["be brief"]}})):
        insert(iterations.insert().values(run_id=RUN, iteration=k, node_scores_changed={}, metrics={},
                                          rewards={"count": 4, "mean": 0.5 + k} if k else None, training=training,
                                          context=context, started_at=NOW, finished_at=NOW))
    changes = _table("node_score_changes", run_id=S, iteration=I, scenario_id=S, node_id=S, score=F)
    for k, node, score in ((1, "n1", 0.4), (1, "n2", 0.9)):
        insert(changes.insert().values(run_id=RUN, iteration=k, scenario_id="scn-a", node_id=node, score=score))
    checkpoints = _table("policy_checkpoints", model_name=S, step=I, data=sa.LargeBinary, metrics=J, created_at=T)
    for step, data in ((0, b"step zero"), (1, b"step one")):
        insert(checkpoints.insert().values(model_name=f"model-{RUN}", step=step, data=data, metrics={}, created_at=NOW))
    deployments = _table("deployments", id=I, graph_id=S, tenant=S, run_id=S, iteration=I, challengers=J, traffic=S,
                         floor=F, min_sends=I, auto_promote=B, require_evidence=B, forced=B, deployed_at=T)
    common = dict(graph_id="g", tenant="alice", traffic="fixed", floor=0.0, min_sends=100, auto_promote=False,
                  require_evidence=False, forced=False, deployed_at=NOW)
    insert(deployments.insert().values(id=1, run_id=GONE, iteration=3, challengers=[], **common))
    insert(deployments.insert().values(id=2, run_id=RUN, iteration=1,
                                       challengers=[{"run_id": RUN, "iteration": 0, "share": 0.5}], **common))
    arms = [{"run_id": RUN, "iteration": 1, "share": 0.5}, {"run_id": RUN, "iteration": 0, "share": 0.5}]
    insert(_table("draft_batches", id=S, tenant=S, graph_id=S, run_id=S, iteration=I, status=S, count=I, arms=J,
                  completed=I, seed=I, created_at=T).insert().values(
        id="drb_1", tenant="alice", graph_id="g", run_id=RUN, iteration=1, status="succeeded", count=2, arms=arms,
        completed=2, seed=0, created_at=NOW))
    drafts = _table("drafts", batch_id=S, position=I, prospect=J, run_id=S, iteration=I, variant=I, propensity=F)
    refs = _table("email_refs", ref=S, tenant=S, run_id=S, iteration=I, slot=I, graph_id=S, scenario_id=S, features=J,
                  content_hash=S, draft_batch_id=S, prospect_id=S)
    for position, k in ((0, 1), (1, 0)):
        insert(drafts.insert().values(batch_id="drb_1", position=position, prospect={"id": f"p{position}"}, run_id=RUN,
                                      iteration=k, variant=position, propensity=0.5))
        insert(refs.insert().values(ref=f"eml_{position}", tenant="alice", run_id=RUN, iteration=k, slot=position,
                                    graph_id="g", scenario_id="scn-a", features=[], content_hash="h",
                                    draft_batch_id="drb_1", prospect_id=f"p{position}"))
    insert(refs.insert().values(ref="eml_own", tenant="alice", run_id=RUN, iteration=1, slot=-1, graph_id="g",
                                scenario_id="scn-a", features=[], content_hash="h"))  # the run's own email
    insert(_table("outcome_events", id=I, tenant=S, event_id=S, run_id=S, iteration=I, ref=S, type=S, occurred_at=T,
                  recipient=S, machine=B, received_at=T).insert().values(
        id=1, tenant="alice", event_id="ev1", run_id=RUN, iteration=0, ref="eml_1", type="delivered", occurred_at=NOW,
        recipient="r", machine=False, received_at=NOW))
    insert(_table("evaluations", id=S, tenant=S, graph_id=S, policies=J, status=S, created_at=T).insert().values(
        id="evl_1", tenant="alice", graph_id="g", policies=[f"{RUN}@1", f"{GONE}@2"], status="succeeded", created_at=NOW))


def test_the_policies_runs_named_are_kept_and_named_by_id(database_url):
    command.upgrade(migrations.alembic_config(database_url), "0013")
    engine = sa.create_engine(driver_url(database_url, sync=True))
    try:
        with engine.begin() as connection:
            seed(connection)
        migrations.upgrade(database_url)
        with engine.begin() as connection:
            rows = {row.source: row for row in connection.execute(sa.text("SELECT * FROM policies"))}
            assert set(rows) == {f"{RUN}@0", f"{RUN}@1"}  # the deleted run's iterations left nothing to keep
            trained, untrained = rows[f"{RUN}@1"], rows[f"{RUN}@0"]
            assert trained.id.startswith("pol_") and (trained.tenant, trained.graph_id, trained.backend) == ("alice", "g", "embedded")
            assert (trained.training_step, untrained.training_step) == (1, 0)
            assert _json(trained.node_scores) == {"scn-a": {"n1": 0.4, "n2": 0.9}} and _json(untrained.node_scores) == {}
            assert _json(trained.lessons) == {"scn-a": {"lessons": ["be brief"]}} and _json(trained.reward)["mean"] == 1.5
            assert trained.checkpoint == f"model-{trained.id}" and _json(trained.config) == CONFIG
            copied = connection.execute(sa.text("SELECT step, data FROM policy_checkpoints WHERE model_name = :name"),
                                        {"name": trained.checkpoint}).all()
            assert [(step, bytes(data)) for step, data in copied] == [(1, b"step one")]

            deployments = connection.execute(sa.text("SELECT id, policy_id, challengers FROM deployments ORDER BY id")).all()
            assert [row.policy_id for row in deployments] == [None, trained.id]
            assert [c["policy_id"] for c in _json(deployments[1].challengers)] == [untrained.id]
            batch = connection.execute(sa.text("SELECT policy_id, arms FROM draft_batches")).one()
            assert batch.policy_id == trained.id and [a["policy_id"] for a in _json(batch.arms)] == [trained.id, untrained.id]
            assert connection.execute(sa.text("SELECT policy_id FROM drafts ORDER BY position")).scalars().all() == [
                trained.id, untrained.id]
            assert dict(connection.execute(sa.text("SELECT ref, policy_id FROM email_refs")).all()) == {
                "eml_0": trained.id, "eml_1": untrained.id, "eml_own": None}
            policy_ids = connection.execute(sa.text("SELECT policy_ids FROM evaluations")).scalar_one()
            assert _json(policy_ids) == [trained.id, None]

            # the run's deletion no longer takes the batch, its drafts' refs or their outcomes along
            if connection.dialect.name == "sqlite":
                connection.execute(sa.text("PRAGMA foreign_keys=ON"))
            connection.execute(sa.text("DELETE FROM runs WHERE id = :id"), {"id": RUN})
            assert connection.execute(sa.text("SELECT count(*) FROM drafts")).scalar_one() == 2
            assert connection.execute(sa.text("SELECT count(*) FROM outcome_events")).scalar_one() == 1
        # back to 0013: what no longer has a run goes, and so do the policies' checkpoint copies
        command.downgrade(migrations.alembic_config(database_url), "0013")
        with engine.begin() as connection:
            assert connection.execute(sa.text("SELECT count(*) FROM drafts")).scalar_one() == 0
            assert connection.execute(sa.text("SELECT count(*) FROM outcome_events")).scalar_one() == 0
            assert connection.execute(sa.text("SELECT model_name FROM policy_checkpoints")).scalars().all() == [
                f"model-{RUN}"] * 2
    finally:
        engine.dispose()


def _json(value):
    """A JSON column as read by a plain text query: parsed on PostgreSQL, text on SQLite."""
    return json.loads(value) if isinstance(value, str) else value
