"""The service path in process (httpx.ASGITransport): run endpoints, the workflow, the relay, and the reward blend."""

import asyncio

import pytest
from sqlalchemy import text
from standardwebhooks import Webhook

from app.backends.registry import create_model
from app.engine.executor import create_judge
from app.kit.settings import Settings
from app.knowledge_graph.graph import NodeScores
from app.knowledge_graph.service import demo_graph
from app.loop.generation import Policy, generate
from app.loop.reward import Scorer
from app.loop.schemas import RunConfig
from app.main import create_app
from app.outcomes.simulated import world_for
from tests.standins import Receiver
from tests.support import connect, finished, lifespan

BODY = {"iterations": 2, "rollouts_per_group": 2, "scenario_ids": ["scn-healthcare-cto"], "max_turns": 4}


@pytest.fixture(scope="module")
async def api(tmp_path_factory):
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path_factory.mktemp('svc')}/db.sqlite",
                        environment="test", webhook_allow_private=True, webhook_retry_schedule=[0.2, 0.2])
    app = create_app(settings)
    async with lifespan(app), connect(app) as client:
        yield client


async def test_a_run_with_a_webhook_end_to_end(api):
    receiver = Receiver(lambda n: (500, 0.0) if n == 0 else (200, 0.0))  # the first attempt fails, and is retried
    try:
        created = await api.post("/learn-loop", json=BODY | {"webhook_url": receiver.url})
        assert created.status_code == 202
        run_id, secret = created.json()["run_id"], created.json()["webhook_secret"]
        run = await finished(api, run_id)
        assert run["status"] == "succeeded" and run["iterations_completed"] == 2
        assert run["config"]["scenario_ids"] == ["scn-healthcare-cto"] and run["config"]["backend"] == "embedded"
        assert run["config"]["train_policy"] is True and run["config"]["reweight_graph"] is True

        events = (await api.get(f"/runs/{run_id}/events")).json()["data"]
        assert [e["type"] for e in events] == ["run.started"] + ["iteration.completed"] * 3 + ["run.succeeded"]
        assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
        assert events[-1]["data"]["final_email"] == run["final_email"]

        for _ in range(100):
            deliveries = (await api.get(f"/runs/{run_id}/webhook-deliveries")).json()["data"]
            if all(d["status"] == "delivered" for d in deliveries) and len(deliveries) == 5:
                break
            await asyncio.sleep(0.1)
        assert [d["status"] for d in deliveries] == ["delivered"] * 5
        assert deliveries[0]["attempts"] == 2 and deliveries[0]["last_error"] is None
        received = {}
        for request in receiver.delivered():
            headers = {k.lower(): v for k, v in request["headers"].items()}
            body = Webhook(secret).verify(request["body"], headers)
            received[headers["webhook-id"]] = body
        assert sorted(received) == sorted(e["id"] for e in events)
        for event in events:  # the webhook's data is exactly the event's data
            assert received[event["id"]]["data"] == event["data"] and received[event["id"]]["type"] == event["type"]
    finally:
        receiver.close()


async def test_a_webhook_urls_query_is_sealed_at_rest_and_sent_as_given(api):
    """A receiver's token in the query is a credential: the database keeps it only sealed, callers see `***`."""
    receiver = Receiver()
    try:
        created = await api.post("/learn-loop", json=BODY | {"iterations": 1, "webhook_url": receiver.url + "?token=s3cret-token"})
        assert created.status_code == 202, created.text
        run_id = created.json()["run_id"]
        run = await finished(api, run_id)
        assert run["config"]["webhook_url"] == receiver.url + "?***"
        for _ in range(100):
            deliveries = (await api.get(f"/runs/{run_id}/webhook-deliveries")).json()["data"]
            if len(deliveries) == 4 and all(d["status"] == "delivered" for d in deliveries):
                break
            await asyncio.sleep(0.1)
        assert [r["path"] for r in receiver.delivered()] == ["/hooks?token=s3cret-token"] * 4
    finally:
        receiver.close()
    database = api._transport.app.state.services.db  # noqa: SLF001 - the rows as stored
    async with database.read() as session:
        stored = (await session.execute(text(
            "SELECT r.webhook_url, d.url FROM runs r JOIN webhook_deliveries d ON d.subject_kind = 'run' "
            "AND d.subject_id = r.id WHERE r.id = :id"),
            {"id": run_id})).all()
    assert len(stored) == 4 and not any("s3cret" in column for row in stored for column in row)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/a\r\nX-Injected: 1", "http://127.0.0.1:9/a\tb", "http://127.0.0.1:9/\x7f"])
async def test_a_webhook_url_with_control_characters_is_a_422(api, url):
    answer = await api.post("/learn-loop", json=BODY | {"webhook_url": url})
    assert answer.status_code == 422 and "control characters" in answer.text


async def test_idempotent_creation_and_refused_transitions(api):
    first = await api.post("/learn-loop", json=BODY, headers={"Idempotency-Key": "k-1"})
    again = await api.post("/learn-loop", json=BODY, headers={"Idempotency-Key": "k-1"})
    other = await api.post("/learn-loop", json=BODY | {"seed": 3}, headers={"Idempotency-Key": "k-1"})
    assert (first.status_code, again.status_code, other.status_code) == (202, 200, 409)
    assert again.json()["run_id"] == first.json()["run_id"]
    run_id = first.json()["run_id"]
    await finished(api, run_id)
    assert (await api.post(f"/runs/{run_id}/cancel")).status_code == 409
    assert (await api.post(f"/runs/{run_id}/resume")).status_code == 409
    assert (await api.get("/runs/run_nope")).status_code == 404
    assert (await api.get(f"/runs/{run_id}/iterations/9")).status_code == 404


async def test_unknown_knobs_and_scenarios_are_422s_naming_the_field(api):
    answer = await api.post("/learn-loop", json={"scenario_ids": ["nope"]})
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "scenario_ids"]
    answer = await api.post("/learn-loop", json={"train_policy": "maybe"})
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "train_policy"]
    answer = await api.post("/learn-loop", json={"iterations": 2, "no_such_knob": 1})
    assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == ["body", "no_such_knob"]


async def test_cancel_stops_a_running_run(api):
    run_id = (await api.post("/learn-loop", json=BODY | {"iterations": 100})).json()["run_id"]
    for _ in range(200):
        if (await api.get(f"/runs/{run_id}")).json()["status"] == "running":
            break
        await asyncio.sleep(0.05)
    cancelled = await api.post(f"/runs/{run_id}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
    await asyncio.sleep(1.0)
    run = (await api.get(f"/runs/{run_id}")).json()
    assert run["status"] == "cancelled" and run["iterations_completed"] < 100
    events = (await api.get(f"/runs/{run_id}/events")).json()["data"]
    assert events[-1]["type"] == "run.cancelled"


async def test_the_reward_blend(backend, tmp_path):
    """reward = (1 - w) · judge + w · feedback; the oracle's feedback = 0.4 · P(open) + 0.6 · P(positive reply), the
    world's readers' own probabilities."""
    graph = demo_graph()
    model = create_model("embedded", Settings(_env_file=None, art_path=str(tmp_path)), "blend")
    await model.register(backend)
    config = RunConfig(rollouts_per_group=4, feedback_weight=0.3)
    judge, feedback = create_judge(Settings(_env_file=None), backend), world_for(graph, seed=0)
    generation = await generate(
        Policy.of(model), graph, [graph.scenarios["scn-healthcare-cto"]], {"scn-healthcare-cto": NodeScores()}, config,
        iteration=1, concurrency=4, score=Scorer(judge, feedback, config, iteration=1),
    )
    trajectories = [t for g in generation.groups for t in g.trajectories]
    assert trajectories
    for t in trajectories:
        m = t.metrics
        assert t.reward == pytest.approx(0.7 * m["judge_score"] + 0.3 * m["feedback_score"])
        assert m["feedback_score"] == pytest.approx(0.4 * m["open_rate"] + 0.6 * m["reply_rate"])
        assert 0 < m["reply_rate"] < 0.2 < m["open_rate"] < 0.7 and m["feedback_confidence"] == 1.0
        assert t.scenario_id == "scn-healthcare-cto" and t.email is not None


