"""End to end over real HTTP against `codreamer serve`, on SQLite and on PostgreSQL."""

import pytest
from standardwebhooks import Webhook

from app.knowledge_graph.service import demo_document
from tests.standins import Receiver
from tests.support import (
    FreshPostgresDatabase,
    Server,
    events,
    parse,
    process_gone,
    require_postgres,
    run_workers,
    wait_for,
    wait_for_status,
)

pytestmark = pytest.mark.slow
SCENARIOS = [s.id for s in demo_document().scenarios[:2]]
NODE_IDS = {n.id for n in demo_document().nodes}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request, tmp_path_factory):
    workdir = tmp_path_factory.mktemp(request.param)
    database = None
    if request.param == "postgresql":
        require_postgres()
        database = FreshPostgresDatabase()
        url = database.url
    else:
        url = f"sqlite:///{workdir}/data/codreamer.sqlite"
    server = Server(workdir, {
        "DATABASE_URL": url, "WEBHOOK_ALLOW_PRIVATE": "true", "WEBHOOK_TIMEOUT_S": "1",
        "WEBHOOK_RETRY_SCHEDULE": "0.5,0.5,1,1,2,2,3,3,5,5,10,10", "EXECUTOR_ID": f"e2e-{request.param}",
    }).start()
    yield server
    server.stop()
    if database:
        database.drop()


def test_a_run_end_to_end(server):
    receiver = Receiver()
    with server.client() as client:
        created = client.post("/learn-loop", json={
            "iterations": 3, "scenario_ids": SCENARIOS, "rollouts_per_group": 3, "webhook_url": receiver.url,
        })
        assert created.status_code == 202, created.text
        run_id, secret = created.json()["run_id"], created.json()["webhook_secret"]
        assert secret.startswith("whsec_")
        run = wait_for_status(client, run_id)
        assert run["status"] == "succeeded", run
        assert run["iterations_completed"] == 3 and run["latest_email"]["score"] is not None
        assert run["config"]["scenario_ids"] == SCENARIOS and "webhook_secret" not in run["config"]

        iterations = client.get(f"/runs/{run_id}/iterations").json()["data"]
        assert [i["iteration"] for i in iterations] == [0, 1, 2, 3]
        assert iterations[0]["rewards"] is None and iterations[0]["training"] is None
        assert iterations[0]["node_scores_changed"] == {}
        for it in iterations:
            assert it["email"]["citations"] and set(it["email"]["citations"]) <= NODE_IDS
        best = max(iterations, key=lambda it: (it["email"]["score"], it["iteration"]))  # the baseline is scored too
        assert run["best_email"] == best["email"] | {"iteration": best["iteration"]}
        assert run["final_email"] == iterations[-1]["email"] | {"iteration": 3}
        assert [i["training"]["step"] for i in iterations[1:]] == [1, 2, 3]
        detail = client.get(f"/runs/{run_id}/iterations/2").json()
        assert len(detail["trajectories"]) == 6 and {t["scenario_id"] for t in detail["trajectories"]} == set(SCENARIOS)

        completed = [e for e in events(client, run_id) if e["type"] == "iteration.completed"]
        assert [e["data"]["iteration"] for e in completed] == [0, 1, 2, 3]
        for event in completed:
            snapshot = client.get(f"/runs/{run_id}/node-scores", params={"iteration": event["data"]["iteration"]}).json()
            assert snapshot["scores"] == event["data"]["node_scores"]
            assert set(snapshot["scores"]) == NODE_IDS
        assert client.get(f"/runs/{run_id}/node-scores").json() == {
            "iteration": 3, "scenario_id": None, "scores": completed[-1]["data"]["node_scores"]}  # the mean over the scenarios
        assert client.get(f"/runs/{run_id}/node-scores", params={"iteration": 4}).status_code == 404

        all_events = events(client, run_id)
        assert [e["seq"] for e in all_events] == list(range(1, len(all_events) + 1))
        assert [e["type"] for e in all_events] == ["run.started"] + ["iteration.completed"] * 4 + ["run.succeeded"]
        wait_for(lambda: len(receiver.delivered()) == len(all_events))  # retries back off under load
        by_id = {e["id"]: e for e in all_events}
        verifier = Webhook(secret)
        for request in receiver.delivered():
            body = verifier.verify(request["body"], request["headers"])
            event = by_id[request["headers"]["webhook-id"]]
            assert body["type"] == event["type"] and body["data"] == event["data"]
        assert sorted(parse(r)["data"]["seq"] for r in receiver.delivered()) == [e["seq"] for e in all_events]
        # The relay records an attempt once its receiver has answered: a moment after the receiver has the request.
        def delivered() -> list[dict] | None:
            listed = client.get(f"/runs/{run_id}/webhook-deliveries").json()["data"]
            return listed if all(d["status"] == "delivered" for d in listed) else None

        deliveries = wait_for(delivered)
        assert len(deliveries) == len(all_events) and {d["attempts"] for d in deliveries} == {1}
    receiver.close()


def test_a_failing_receiver_never_holds_up_the_run(server):
    healthy = False
    failures = [(500, 0.0), (302, 0.0), (200, 2.5)]  # the last one answers after the 1 s timeout
    receiver = Receiver(lambda n: (200, 0.0) if healthy else failures[n % 3])
    with server.client() as client:
        run_id = client.post("/learn-loop", json={
            "iterations": 2, "scenario_ids": SCENARIOS[:1], "rollouts_per_group": 2, "webhook_url": receiver.url,
        }).json()["run_id"]
        assert wait_for_status(client, run_id)["status"] == "succeeded"
        deliveries = client.get(f"/runs/{run_id}/webhook-deliveries").json()["data"]
        assert len(deliveries) == 5 and all(d["status"] == "pending" for d in deliveries)  # the run did not wait

        wait_for(lambda: len(receiver.requests) >= 9, timeout=60)
        healthy = True
        wait_for(lambda: all(d["status"] == "delivered" for d in client.get(f"/runs/{run_id}/webhook-deliveries").json()["data"]), timeout=60)
        deliveries = client.get(f"/runs/{run_id}/webhook-deliveries").json()["data"]
        for delivery in deliveries:
            sent = [r for r in receiver.requests if r["headers"]["webhook-id"] == delivery["event_id"]]
            assert delivery["attempts"] == len(sent) and delivery["last_status_code"] == 200
            assert len({r["body"] for r in sent}) == 1  # every retry carries the same body and id
        statuses = {r["status"] for r in receiver.requests}
        assert {500, 302} <= statuses
        assert any(d["attempts"] > 1 for d in deliveries)
    receiver.close()


def test_promotions_and_a_rollback_reach_the_deployments_webhook_signed(server):
    """Over real HTTP: each new champion is an event of the graph, POSTed to the deployment's receiver, signed with its
    secret, and streamed live."""
    receiver = Receiver()
    with server.client() as client:
        created = client.post("/learn-loop", json={"iterations": 1, "rollouts_per_group": 2, "scenario_ids": SCENARIOS[:1]})
        run_id = created.json()["run_id"]
        assert wait_for_status(client, run_id)["status"] == "succeeded"
        before = client.get("/graphs/demo/events", params={"limit": 1000}).json()["data"]
        secret = None
        for policy in (f"{run_id}@1", f"{run_id}@0", f"{run_id}@1"):
            answer = client.put("/graphs/demo/deployment", json={"policy": policy, "webhook_url": receiver.url})
            assert answer.status_code == 200
            secret = secret or answer.json()["webhook_secret"]
        promotions = client.get("/graphs/demo/events", params={"limit": 1000}).json()["data"][len(before):]
        assert [(e["type"], e["data"]["policy"], e["data"]["trigger"]) for e in promotions] == [
            ("policy.promoted", f"{run_id}@1", "request"), ("policy.promoted", f"{run_id}@0", "request"),
            ("policy.rolled_back", f"{run_id}@1", "request")]
        wait_for(lambda: {e["id"] for e in promotions} <= {r["headers"]["webhook-id"] for r in receiver.delivered()}, timeout=60)
        verifier = Webhook(secret)
        heard = {r["headers"]["webhook-id"]: verifier.verify(r["body"], r["headers"]) for r in receiver.delivered()}
        for event in promotions:
            assert heard[event["id"]] == heard[event["id"]] | {"type": event["type"], "data": event["data"]}
        # the graph's stream, resumed after the events before, gives the three (and goes on: the client leaves)
        streamed = []
        with client.stream("GET", "/graphs/demo/events", headers={
                "Accept": "text/event-stream", "Last-Event-ID": str(before[-1]["seq"] if before else 0)}) as answer:
            for line in answer.iter_lines():
                if line.startswith("event: "):
                    streamed.append(line.removeprefix("event: "))
                if len(streamed) == len(promotions):
                    break
        assert streamed == [e["type"] for e in promotions]
    receiver.close()


def test_crash_mid_run_resumes_exactly_once(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/data/codreamer.sqlite", "EXECUTOR_ID": "crash-worker"}
    server = Server(tmp_path, env).start()
    try:
        with server.client() as client:
            run = {"iterations": 4, "rollouts_per_group": 3, "scenario_ids": SCENARIOS}
            run_id = client.post("/learn-loop", json=run).json()["run_id"]
            wait_for(lambda: client.get(f"/runs/{run_id}").json()["iterations_completed"] >= 2, timeout=120)
        workers = run_workers(server.process.pid)
        server.kill()
        assert workers and wait_for(lambda: all(process_gone(w) for w in workers), timeout=30)  # the worker went with it
        server = Server(tmp_path, env).start()
        with server.client() as client:
            run = wait_for_status(client, run_id, timeout=240)
            assert run["status"] == "succeeded", run
            iterations = client.get(f"/runs/{run_id}/iterations").json()["data"]
            assert [i["iteration"] for i in iterations] == list(range(5))
            assert [i["training"]["step"] for i in iterations[1:]] == [1, 2, 3, 4]
            completed = [e["data"]["iteration"] for e in events(client, run_id) if e["type"] == "iteration.completed"]
            assert completed == list(range(5))
    finally:
        server.stop()
