"""Outcomes in a run: the demo's simulated provider feeding scoring, and iterations paced by outcomes.

Each test runs a service of its own, so none may share its process with another test's service (one DBOS per
process): they are kept apart from the module-scoped service of `test_outcomes.py`.
"""

import asyncio

from app.kit.settings import Settings
from app.main import create_app
from app.simulation.graphs import synthetic_document
from tests.service.test_outcomes import BODY, event
from tests.support import connect, finished, lifespan

# ---------------------------------------------------------------- the demo through the same path


async def test_on_the_demo_a_simulated_provider_sends_each_published_email_and_scoring_uses_what_came_back(tmp_path):
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/db.sqlite", environment="test",
                        secret_key="test-secret-key-for-outcomes")
    app = create_app(settings)
    async with lifespan(app), connect(app) as client:
        body = {key: value for key, value in BODY.items() if key != "feedback_source"} | {"iterations": 2}
        run_id = (await client.post("/learn-loop", json=body)).json()["run_id"]
        run = await finished(client, run_id, timeout=300)
        assert run["status"] == "succeeded" and run["config"]["feedback_source"] == "simulated"
        sent = (await client.get(f"/runs/{run_id}/outcomes")).json()["data"]
        published = [(await client.get(f"/runs/{run_id}/iterations/{i}")).json()["email"]["ref"] for i in range(3)]
        assert [e["ref"] for e in sent] == published  # only the published emails were sent
        for email in sent:
            assert email["sends"] == 50 and email["delivered"] + email["bounces"] == 50
            assert email["machine_opens"] > 0 and email["opens"] <= email["delivered"]
        # Iteration 1 was scored after the baseline's outcomes came back: predicted, with some of the feedback's weight
        # (how much, by the traits each candidate shares with the baseline, the unit tests pin).
        for trajectory in (await client.get(f"/runs/{run_id}/iterations/1")).json()["trajectories"]:
            assert trajectory["feedback_source"] == "predicted", trajectory
            assert 0 < trajectory["feedback_confidence"] < 1, trajectory
        # What is sent after the baseline is drawn among the greedy email and the iteration's candidates for the target.
        for iteration in (1, 2):
            detail = (await client.get(f"/runs/{run_id}/iterations/{iteration}")).json()
            candidates = [t["email"]["body"] for t in detail["trajectories"] if t["email"]]
            if detail["metrics"]["email/chosen_by_outcomes"] == 1.0:
                assert detail["email"]["body"] in candidates
        # A graph without simulated prospects has no simulator to send with, nor an oracle.
        document = synthetic_document(2)
        assert (await client.post("/graphs", json=document.model_dump(mode="json"))).status_code == 201
        for source in ("simulated", "oracle"):
            refused = await client.post("/learn-loop", json={"graph_id": document.id, "feedback_source": source, "iterations": 1})
            assert refused.status_code == 422 and "no simulated prospects" in refused.text
        default = (await client.post("/learn-loop", json={"graph_id": document.id, "iterations": 1})).json()["run_id"]
        assert (await client.get(f"/runs/{default}")).json()["config"]["feedback_source"] == "outcomes"


# ---------------------------------------------------------------- iterations paced by outcomes


async def test_a_run_waits_for_its_outcomes_goes_on_when_they_arrive_and_can_be_cancelled_while_waiting(tmp_path):
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/db.sqlite", environment="test",
                        secret_key="test-secret-key-for-outcomes")
    app = create_app(settings)
    body = BODY | {"feedback_wait": {"min_delivered": 2, "timeout_s": 3600}}
    async with lifespan(app), connect(app) as client:
        run_id = (await client.post("/learn-loop", json=body)).json()["run_id"]
        run = await waiting(client, run_id)
        assert run["status"] == "running" and run["waiting"]["iteration"] == 0 and run["waiting"]["min_delivered"] == 2
        assert run["waiting"]["delivered"] == 0
        events = (await client.get(f"/runs/{run_id}/events")).json()["data"]
        assert [e["data"]["waiting"]["iteration"] for e in events if e["type"] == "run.waiting"] == [0]
        ref = (await client.get(f"/runs/{run_id}/iterations/0")).json()["email"]["ref"]
        await client.post("/outcomes", json={"events": [event(ref, "delivered", "w1", "a@example.org")]})
        await asyncio.sleep(1)
        assert (await client.get(f"/runs/{run_id}")).json()["waiting"] is not None  # one of two: still waiting
        await client.post("/outcomes", json={"events": [event(ref, "delivered", "w2", "b@example.org")]})
        run = await finished(client, run_id, timeout=120)  # woken at once (the poll alone would take a minute)
        assert run["status"] == "succeeded" and run["waiting"] is None and run["iterations_completed"] == 1
        assert run["config"]["max_steps_off_policy"] == 0  # iteration 1 is scored on iteration 0's outcomes: in order
        refused = await client.post("/learn-loop", json=body | {"max_steps_off_policy": 1})
        assert refused.status_code == 422 and "strict order" in refused.text

        second = (await client.post("/learn-loop", json=body)).json()["run_id"]
        await waiting(client, second)
        assert (await client.post(f"/runs/{second}/cancel")).status_code == 202
        run = await finished(client, second, timeout=60)
        assert run["status"] == "cancelled" and run["waiting"] is None


async def test_a_wait_ends_at_its_timeout_with_what_arrived(tmp_path):
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/db.sqlite", environment="test",
                        secret_key="test-secret-key-for-outcomes")
    app = create_app(settings)
    async with lifespan(app), connect(app) as client:
        body = BODY | {"feedback_wait": {"min_delivered": 1000, "timeout_s": 3}}
        run_id = (await client.post("/learn-loop", json=body)).json()["run_id"]
        run = await finished(client, run_id, timeout=120)
        assert run["status"] == "succeeded" and run["waiting"] is None


async def waiting(client, run_id: str, timeout: float = 120) -> dict:
    for _ in range(int(timeout / 0.1)):
        run = (await client.get(f"/runs/{run_id}")).json()
        if run["waiting"] is not None or run["status"] in ("succeeded", "failed", "cancelled"):
            return run
        await asyncio.sleep(0.1)
    raise AssertionError("the run never waited")
