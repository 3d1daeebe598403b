"""A run waiting for outcomes survives kill -9: it resumes waiting under the same deadline and goes on when they arrive;
on PostgreSQL outcomes stored by the API wake it at once (its worker watches for them)."""

import time

import pytest

from tests.support import FreshPostgresDatabase, Server, require_postgres, wait_for, wait_for_status

pytestmark = pytest.mark.slow


BODY = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": ["scn-healthcare-cto"], "max_turns": 3,
        "feedback_source": "none", "feedback_wait": {"min_delivered": 1, "timeout_s": 3600}}


def delivered(ref: str, event_id: str) -> dict:
    return {"events": [{"ref": ref, "type": "delivered", "id": event_id, "occurred_at": "2026-11-20T09:30:00Z",
                        "recipient": "x@example.org"}]}


def test_kill_9_while_waiting_then_restart_the_run_waits_again_and_completes_when_outcomes_arrive(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/data/codreamer.sqlite", "EXECUTOR_ID": "waiter"}
    server = Server(tmp_path, env).start(timeout=180)
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json=BODY).json()["run_id"]
            before = wait_for(lambda: (run := client.get(f"/runs/{run_id}").json())["waiting"] and run, timeout=240)["waiting"]
        server.kill()
        server = Server(tmp_path, env).start(timeout=180)  # the same EXECUTOR_ID: DBOS recovers its workflow
        with server.client() as client:
            again = wait_for(lambda: (run := client.get(f"/runs/{run_id}").json())["status"] == "running" and run, timeout=60)
            assert again["waiting"] == before  # the same wait, the same deadline
            waiting_events = [e for e in client.get(f"/runs/{run_id}/events").json()["data"] if e["type"] == "run.waiting"]
            assert len(waiting_events) == 1  # announced once, not again on recovery
            ref = client.get(f"/runs/{run_id}/iterations/0").json()["email"]["ref"]
            answer = client.post("/outcomes", json=delivered(ref, "after-restart"))
            assert answer.json()["accepted"] == 1
            run = wait_for_status(client, run_id, timeout=240)
            assert run["status"] == "succeeded" and run["iterations_completed"] == 1 and run["waiting"] is None
    finally:
        server.stop()


def test_on_postgresql_outcomes_posted_to_the_api_wake_the_worker_s_waiting_run_at_once(tmp_path):
    """The API only stores the outcomes; the worker sees them within a second and tells its waiting workflow, which
    hears it from the notice of DBOS's trigger, not at the end of its minute-long receive."""
    require_postgres()
    database = FreshPostgresDatabase()
    server = Server(tmp_path, {"DATABASE_URL": database.url, "EXECUTOR_ID": "waiter-pg"})
    try:
        server.start(timeout=180)
        with server.client() as client:
            run_id = client.post("/learn-loop", json=BODY).json()["run_id"]
            wait_for(lambda: client.get(f"/runs/{run_id}").json()["waiting"], timeout=240)
            ref = client.get(f"/runs/{run_id}/iterations/0").json()["email"]["ref"]
            posted = time.monotonic()
            assert client.post("/outcomes", json=delivered(ref, "wake")).json()["accepted"] == 1
            wait_for(lambda: client.get(f"/runs/{run_id}").json()["waiting"] is None, timeout=120)
            assert time.monotonic() - posted < 30, "the wait ended only when its receive timed out"
            run = wait_for_status(client, run_id, timeout=240)
            assert run["status"] == "succeeded" and run["iterations_completed"] == 1
    finally:
        server.stop()
        database.drop()
