"""Draft batches and evaluations shared fairly between tenants (issue 53): a cap of queued or running ones per tenant
(429 with Retry-After), the queues partitioned by tenant, cancel and resume, steps re-run through database trouble,
and webhooks that never hold a queue slot. On SQLite and PostgreSQL, the app in process with its worker."""

import asyncio

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from app.events.models import WebhookDelivery
from tests.drills import prospects, writer_failing_for
from tests.support import free_port, learned, settled, two_tenants

BODY = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": ["scn-saas-cfo", "scn-healthcare-cto"],
        "max_turns": 4, "feedback_source": "none"}
CAP = 3
EVALUATION_CAP = 2


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
async def world(request, tmp_path_factory):
    """Alice and Bob on one service with its worker: two slots in all, one per tenant; Alice's finished run."""
    async with two_tenants(request.param, tmp_path_factory.mktemp("fair"), secret_key="test-secret-key-for-fair-queues",
                           webhook_allow_private=True, max_concurrent_runs=2, worker_concurrency=2,
                           draft_concurrency_per_tenant=1, max_active_draft_batches_per_tenant=CAP,
                           max_active_evaluations_per_tenant=EVALUATION_CAP) as (app, alice, bob):
        yield alice, bob, await learned(alice, BODY), await learned(bob, BODY), app


async def workflows_ended(*workflow_ids: str, timeout: float = 120) -> None:
    """Their DBOS workflows (and so their queue slots) are done: the next test starts with free slots."""
    from dbos import DBOS

    for _ in range(int(timeout / 0.1)):
        statuses = [(await DBOS.get_workflow_status_async(w)).status for w in workflow_ids]
        if all(s in ("SUCCESS", "ERROR", "CANCELLED") for s in statuses):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"workflows still going: {statuses}")


async def test_a_noisy_tenant_is_capped_and_holds_no_other_tenants_batch(world):
    alice, bob, run_id, bobs_run, _ = world
    policy = f"{run_id}@1"
    batches = [(await alice.post("/drafts", json={"graph_id": "demo", "policy": policy, "prospects": prospects(60)}))
               for _ in range(CAP)]
    assert [b.status_code for b in batches] == [202] * CAP
    refused = await alice.post("/drafts", json={"graph_id": "demo", "policy": policy, "prospects": prospects(1)})
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
    assert "MAX_ACTIVE_DRAFT_BATCHES_PER_TENANT=3" in refused.json()["detail"]
    evaluations = [await alice.post("/evaluations", json={"graph_id": "demo", "policies": [policy]})
                   for _ in range(EVALUATION_CAP + 1)]
    assert [e.status_code for e in evaluations] == [202] * EVALUATION_CAP + [429]
    assert "MAX_ACTIVE_EVALUATIONS_PER_TENANT=2" in evaluations[-1].json()["detail"]
    assert int(evaluations[-1].headers["retry-after"]) > 0

    # Bob's one prospect is drafted while Alice's queue is still full: her tenant holds one of the two slots at most
    mine = await bob.post("/drafts", json={"graph_id": "demo", "policy": f"{bobs_run}@1",
                                           "prospects": prospects(1, "Bob's")})
    assert mine.status_code == 202
    assert (await settled(bob, f"/draft-batches/{mine.json()['batch_id']}"))["status"] == "succeeded"
    alices = [(await alice.get(f"/draft-batches/{b.json()['batch_id']}")).json()["status"] for b in batches]
    alices += [(await alice.get(f"/evaluations/{e.json()['evaluation_id']}")).json()["status"]
               for e in evaluations[:-1]]
    assert {"queued", "running"} & set(alices), alices

    # Alice cancels what has not ended; a stranger cannot, and a finished one says so
    batch_ids = [b.json()["batch_id"] for b in batches]
    evaluation_ids = [e.json()["evaluation_id"] for e in evaluations[:-1]]
    assert (await bob.post(f"/draft-batches/{batch_ids[-1]}/cancel")).status_code == 404
    assert (await bob.post(f"/evaluations/{evaluation_ids[-1]}/cancel")).status_code == 404
    for batch_id in batch_ids:
        answer = await alice.post(f"/draft-batches/{batch_id}/cancel")
        assert answer.status_code in (202, 409), answer.text
        if answer.status_code == 202:
            assert answer.json()["status"] == "cancelled"
            again = await alice.post(f"/draft-batches/{batch_id}/cancel")
            assert again.status_code == 409 and "cancelled" in again.json()["detail"]
            events = (await alice.get(f"/draft-batches/{batch_id}/events")).json()["data"]
            assert [e["type"] for e in events] == ["draft_batch.cancelled"]
    for evaluation_id in evaluation_ids:
        answer = await alice.post(f"/evaluations/{evaluation_id}/cancel")
        assert answer.status_code in (202, 409), answer.text
    await workflows_ended(*batch_ids, *evaluation_ids)
    # what was cancelled stays cancelled, and drafted nothing after the cancel
    for batch_id in batch_ids:
        batch = (await alice.get(f"/draft-batches/{batch_id}")).json()
        drafts = (await alice.get(f"/draft-batches/{batch_id}/drafts", params={"limit": 100})).json()["data"]
        assert batch["status"] in ("cancelled", "succeeded"), batch
        assert sum(1 for d in drafts if d["email"]) == batch["completed"]
    assert (await bob.post(f"/draft-batches/{mine.json()['batch_id']}/cancel")).status_code == 409
    # the cap counts only what is queued or running: Alice may draft again
    again = await alice.post("/drafts", json={"graph_id": "demo", "policy": policy, "prospects": prospects(1)})
    assert again.status_code == 202
    assert (await settled(alice, f"/draft-batches/{again.json()['batch_id']}"))["status"] == "succeeded"


async def test_dead_webhooks_hold_no_batch_evaluation_or_slot(world):
    """Two batches and a deployment whose receivers refuse every connection (a closed loopback port): every batch and
    the evaluation end, while their deliveries are still being retried by the outbox relay."""
    alice, bob, run_id, bobs_run, app = world
    dead = f"http://127.0.0.1:{free_port()}/hooks"
    policy = f"{run_id}@1"
    deployed = await alice.put("/graphs/demo/deployment", json={"policy": policy, "webhook_url": dead})
    assert deployed.status_code == 200, deployed.text
    held = [(await alice.post("/drafts", json={"graph_id": "demo", "policy": policy, "prospects": prospects(1),
                                                "webhook_url": dead})).json()["batch_id"] for _ in range(2)]
    evaluation = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": [policy]})).json()
    others = [(await bob.post("/drafts", json={"graph_id": "demo", "policy": f"{bobs_run}@1",
                                                "prospects": prospects(1, "Bob's")})).json()["batch_id"],
              (await alice.post("/drafts", json={"graph_id": "demo", "policy": policy, "prospects": prospects(1)})
               ).json()["batch_id"]]
    for batch_id, client in zip([*held, *others], [alice, alice, bob, alice], strict=True):
        assert (await settled(client, f"/draft-batches/{batch_id}"))["status"] == "succeeded"
    assert (await settled(alice, f"/evaluations/{evaluation['evaluation_id']}"))["status"] == "succeeded"
    newest = (await alice.get("/evaluations", params={"graph_id": "demo", "limit": 1})).json()
    assert [e["evaluation_id"] for e in newest["data"]] == [evaluation["evaluation_id"]], newest
    assert evaluation["evaluation_id"] not in [e["evaluation_id"] for e in (await bob.get("/evaluations")).json()["data"]]
    batches = (await alice.get("/draft-batches", params={"graph_id": "demo", "limit": 2})).json()
    assert [b["batch_id"] for b in batches["data"]] == [others[1], held[1]] and batches["has_more"], batches
    await workflows_ended(*held, *others, evaluation["evaluation_id"])
    async with app.state.services.db.read() as session:
        deliveries = (await session.scalars(select(WebhookDelivery).where(WebhookDelivery.url.is_not(None)))).all()
    pending = {(d.subject_kind, d.subject_id) for d in deliveries if d.status == "pending"}
    # the workflows are over, the receivers never answered: the outbox still holds their deliveries
    assert {("draft_batch", batch_id) for batch_id in held} <= {(str(k), i) for k, i in pending}
    assert any(str(kind) == "graph" for kind, _ in pending)
    assert (await alice.put("/graphs/demo/deployment", json={"policy": policy, "webhook_url": None})).status_code == 200


async def test_a_failed_batch_resumes_drafting_only_what_is_missing(world, monkeypatch):
    from app.drafts import workflow

    alice, bob, run_id, _, _ = world
    write_for = workflow.write_for
    monkeypatch.setattr(workflow, "write_for", writer_failing_for("Prospect 30"))  # in the second chunk
    created = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@1",
                                                 "prospects": prospects(60)})).json()
    batch_id = created["batch_id"]
    failed = await settled(alice, f"/draft-batches/{batch_id}")
    assert (failed["status"], failed["completed"]) == ("failed", 35), failed
    listed = (await alice.get(created["links"]["drafts"], params={"limit": 100})).json()["data"]
    first = {d["position"]: d["email"]["ref"] for d in listed if d["email"]}
    monkeypatch.setattr(workflow, "write_for", write_for)
    assert (await bob.post(f"/draft-batches/{batch_id}/resume")).status_code == 404
    resumed = await alice.post(f"/draft-batches/{batch_id}/resume")
    assert resumed.status_code == 202 and resumed.json()["status"] == "queued", resumed.text
    assert (await alice.post(f"/draft-batches/{batch_id}/resume")).status_code == 409  # queued, not failed
    batch = await settled(alice, f"/draft-batches/{batch_id}")
    assert (batch["status"], batch["completed"], batch["error"]) == ("succeeded", 60, None), batch
    drafts = (await alice.get(created["links"]["drafts"], params={"limit": 100})).json()["data"]
    assert all(d["email"] for d in drafts)
    assert {d["position"]: d["email"]["ref"] for d in drafts if d["position"] in first} == first  # kept, not redrafted
    refs = [o["ref"] for o in (await alice.get(f"/draft-batches/{batch_id}/outcomes")).json()["data"]]
    assert len(refs) == len(set(refs)) == 60
    events = (await alice.get(f"/draft-batches/{batch_id}/events")).json()["data"]
    assert [e["type"] for e in events] == ["draft_batch.failed", "draft_batch.succeeded"]
    assert (await alice.post(f"/draft-batches/{batch_id}/resume")).status_code == 409


async def test_chunk_and_evaluation_steps_are_rerun_through_a_passing_database_error(world, monkeypatch):
    """The first store of every chunk and the first evaluation attempt lose their connection: each is re-run, and
    nothing fails or is drafted twice."""
    from app.drafts import repository
    from app.evaluations import workflow as evaluations

    alice, _, run_id, _, _ = world
    store, fit, failed = repository.count_completed, evaluations.OutcomeModel.fit, set()

    def lost(key):
        if key in failed:
            return False
        failed.add(key)
        return True

    async def count_completed(session, batch_id, stored):
        if lost(("chunk", batch_id, stored)):
            raise OperationalError("UPDATE draft_batches", {}, ConnectionResetError("the server closed the connection"))
        return await store(session, batch_id, stored)

    def fit_once(*args, **kwargs):
        if lost("evaluation"):
            raise OperationalError("SELECT", {}, ConnectionResetError("the server closed the connection"))
        return fit(*args, **kwargs)

    monkeypatch.setattr(repository, "count_completed", count_completed)
    monkeypatch.setattr(evaluations.OutcomeModel, "fit", staticmethod(fit_once))
    created = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@1",
                                                 "prospects": prospects(30)})).json()
    evaluation = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": [f"{run_id}@1"]})).json()
    batch = await settled(alice, f"/draft-batches/{created['batch_id']}")
    assert (batch["status"], batch["completed"]) == ("succeeded", 30), batch
    assert (await settled(alice, f"/evaluations/{evaluation['evaluation_id']}"))["status"] == "succeeded"
    assert {key[0] if isinstance(key, tuple) else key for key in failed} == {"chunk", "evaluation"}
    refs = [o["ref"] for o in (await alice.get(f"/draft-batches/{created['batch_id']}/outcomes")).json()["data"]]
    assert len(refs) == len(set(refs)) == 30


async def test_a_chunk_claimed_here_and_never_started_is_resumed(world):
    """As DBOS leaves a workflow whose start failed after its claim (the database went away between them): PENDING,
    this worker's, and executing nowhere. Housekeeping resumes it once WORKER_TIMEOUT_S has passed, and it ends."""
    import uuid

    from dbos import DBOS
    from dbos._dbos import _get_dbos_instance

    from app import tasks
    from app.kit import durable
    from app.runs.workers import Housekeeper

    alice, _, run_id, _, app = world
    created = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@1",
                                                 "prospects": prospects(1)})).json()
    assert (await settled(alice, f"/draft-batches/{created['batch_id']}"))["status"] == "succeeded"
    settings = app.state.services.settings
    stalled = f"stalled-{uuid.uuid4().hex[:8]}"
    await durable.client().enqueue_async(  # on a queue no worker polls, then claimed for this worker as DBOS claims
        {"queue_name": "nobody-polls-this", "workflow_name": tasks.DRAFT_CHUNK.name, "workflow_id": stalled,
         "app_version": tasks.APPLICATION_VERSION}, created["batch_id"], 0, 1)
    system = _get_dbos_instance()._sys_db
    with system.engine.begin() as connection:
        status = system.tables.workflow_status
        connection.execute(status.update().where(status.c.workflow_uuid == stalled)
                           .values(status="PENDING", executor_id=settings.executor_id))
    housekeeper = Housekeeper(app.state.services.db, settings.model_copy(update={"worker_timeout_s": 0.5}))
    assert await housekeeper.restart_stalled_drafting() == []  # seen; not for long enough yet
    await asyncio.sleep(0.6)
    assert await housekeeper.restart_stalled_drafting() == [stalled]
    for _ in range(300):
        if (await DBOS.get_workflow_status_async(stalled)).status == "SUCCESS":
            break
        await asyncio.sleep(0.1)
    assert (await DBOS.get_workflow_status_async(stalled)).status == "SUCCESS"  # its prospect was drafted already
    assert (await alice.get(f"/draft-batches/{created['batch_id']}")).json()["completed"] == 1

    # one of an earlier version is abandoned too: no worker of this version would ever run it
    earlier = f"earlier-{uuid.uuid4().hex[:8]}"
    await durable.client().enqueue_async(
        {"queue_name": "nobody-polls-this", "workflow_name": tasks.DRAFT_CHUNK.name, "workflow_id": earlier,
         "app_version": "draft_batch-1+draft_batch_chunk-1"}, created["batch_id"], 0, 1)
    states = await durable.states([stalled, earlier, "no-such-workflow"])
    assert (states[stalled].abandoned, states[earlier].stale, states[earlier].abandoned) == (False, True, True)
    assert "no-such-workflow" not in states


async def test_a_batch_or_evaluation_whose_workflow_ended_without_it_fails_resumable(world):
    """Housekeeping ends what nothing would end any more: here each workflow is cancelled under its batch or
    evaluation, as one whose last step failed through a long outage ends, leaving the row queued or running."""
    from app.drafts import service as drafts
    from app.evaluations import service as evaluations
    from app.kit import durable

    alice, _, run_id, _, app = world
    services = app.state.services
    created = (await alice.post("/drafts", json={"graph_id": "demo", "policy": f"{run_id}@1",
                                                 "prospects": prospects(40)})).json()
    evaluation = (await alice.post("/evaluations", json={"graph_id": "demo", "policies": [f"{run_id}@1"]})).json()
    await durable.cancel(created["batch_id"])
    await durable.cancel(evaluation["evaluation_id"])
    await workflows_ended(created["batch_id"], evaluation["evaluation_id"])
    await drafts.end_orphans(services)  # as the worker's housekeeping does every round
    await evaluations.end_orphans(services)
    batch = await settled(alice, f"/draft-batches/{created['batch_id']}")
    assert batch["status"] == "failed" and "workflow ended (CANCELLED)" in batch["error"]["message"], batch
    failed = await settled(alice, f"/evaluations/{evaluation['evaluation_id']}")
    assert failed["status"] == "failed" and "workflow ended (CANCELLED)" in failed["error"]["message"], failed
    assert await drafts.end_orphans(services) == []  # once
    assert (await alice.post(f"/draft-batches/{created['batch_id']}/resume")).status_code == 202
    batch = await settled(alice, f"/draft-batches/{created['batch_id']}")
    assert (batch["status"], batch["completed"]) == ("succeeded", 40), batch
    events = (await alice.get(f"/draft-batches/{created['batch_id']}/events")).json()["data"]
    assert [e["type"] for e in events] == ["draft_batch.failed", "draft_batch.succeeded"]
