"""Races a second client could win: a graph replaced or deleted as a run is created on it, and the
per-tenant cap under a burst of creates, on SQLite and PostgreSQL (in process, concurrent requests); and a run's
steps asking for its policy at once."""

import asyncio

import art
import pytest

from app.engine.executor import current
from app.kit.settings import Settings
from app.knowledge_graph.service import demo_document
from app.lifecycle.local import local_service
from app.main import create_app
from tests.support import FreshPostgresDatabase, connect, lifespan, require_postgres

CAP = 5
ROUNDS = 12


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
async def api(request, tmp_path_factory):
    """API only (runs stay queued, so every created run counts against the cap and keeps its graph in use)."""
    database = None
    if request.param == "postgresql":
        require_postgres()
        database = FreshPostgresDatabase()
        url = database.url
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('races')}/db.sqlite"
    settings = Settings(_env_file=None, database_url=url, environment="test", run_worker=False, secret_key="races-tests-secret-key",
                        api_keys=["cap:cap-key", "graphs:graphs-key"], max_active_runs_per_tenant=CAP)
    app = create_app(settings)
    try:
        async with lifespan(app), connect(app) as client:
            yield client
    finally:
        if database is not None:
            database.drop()


def graph(graph_id: str, scenario_id: str) -> dict:
    """A small graph whose one scenario is `scenario_id`."""
    demo = demo_document().model_dump()
    scenario = demo["scenarios"][0] | {"id": scenario_id}
    return demo | {"id": graph_id, "name": graph_id, "scenarios": [scenario]}


GRAPHS = {"Authorization": "Bearer graphs-key"}


async def test_a_replacement_racing_a_run_never_both_succeed(api):
    """Today both could succeed, and the run then failed on a scenario the new graph lacks."""
    for n in range(ROUNDS):
        graph_id = f"replaced-{n}"
        assert (await api.post("/graphs", json=graph(graph_id, "old"), headers=GRAPHS)).status_code == 201
        put, post = await asyncio.gather(
            api.put(f"/graphs/{graph_id}", json=graph(graph_id, "new"), headers=GRAPHS),
            api.post("/learn-loop", json={"graph_id": graph_id, "scenario_ids": ["old"], "iterations": 1}, headers=GRAPHS),
        )
        outcome = (put.status_code, post.status_code)
        # the replacement first (the run then names a scenario it no longer has), or the run first (the graph is in use)
        assert outcome in ((200, 409), (200, 422), (409, 202)), (outcome, put.text, post.text)
        if post.status_code == 202:
            run = (await api.get(f"/runs/{post.json()['run_id']}", headers=GRAPHS)).json()
            assert run["config"]["scenario_ids"] == ["old"]
            assert (await api.get(f"/graphs/{graph_id}/scenarios", headers=GRAPHS)).json()["data"][0]["id"] == "old"
        await api.post(f"/runs/{post.json()['run_id']}/cancel", headers=GRAPHS) if post.status_code == 202 else None


async def test_a_deletion_racing_a_run_is_never_a_500(api):
    """Today the create could answer 500 (a foreign-key error taken for an idempotency race) and the delete too."""
    for n in range(ROUNDS):
        graph_id = f"deleted-{n}"
        assert (await api.post("/graphs", json=graph(graph_id, "only"), headers=GRAPHS)).status_code == 201
        delete, post = await asyncio.gather(
            api.delete(f"/graphs/{graph_id}", headers=GRAPHS),
            api.post("/learn-loop", json={"graph_id": graph_id, "iterations": 1},
                     headers=GRAPHS | {"Idempotency-Key": f"delete-race-{n}"}),
        )
        outcome = (delete.status_code, post.status_code)
        assert outcome in ((204, 422), (409, 202)), (outcome, delete.text, post.text)
        if post.status_code == 202:
            await api.post(f"/runs/{post.json()['run_id']}/cancel", headers=GRAPHS)


async def test_the_active_run_cap_holds_under_a_burst(api):
    """60 creates at once for a tenant capped at 5: exactly 5 are queued, the rest are 429."""
    answers = await asyncio.gather(*(
        api.post("/learn-loop", json={"iterations": 1}, headers={"Authorization": "Bearer cap-key"}) for _ in range(60)))
    codes = sorted(answer.status_code for answer in answers)
    assert codes == [202] * CAP + [429] * (60 - CAP), codes
    listed = (await api.get("/runs", params={"status": "queued", "limit": 100}, headers={"Authorization": "Bearer cap-key"})).json()
    assert len(listed["data"]) == CAP


async def test_steps_that_ask_at_once_for_a_runs_policy_share_one_registration(tmp_path, monkeypatch):
    """A resumed pipelined run's first stage asks for its policy from three steps at once. Each used to register the
    model anew: the last registration replaced the checkpoints a training step had just added to, and the next
    iteration trained that step again (caught by the SIGTERM drill: iterations 3 and 4 both at step 3)."""
    registered = []
    register = art.TrainableModel.register

    async def counted(model, backend, *args, **kwargs):
        registered.append(model.name)
        await register(model, backend, *args, **kwargs)

    monkeypatch.setattr(art.TrainableModel, "register", counted)
    async with local_service(tmp_path, Settings(_env_file=None)):
        policies = await asyncio.gather(*(current().policy("run_at_once", "embedded") for _ in range(3)))
        assert policies[0] is policies[1] is policies[2]
        assert len(registered) == 1
        await current().release("run_at_once")
