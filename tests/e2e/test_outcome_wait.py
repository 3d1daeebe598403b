"""A run waiting for outcomes survives kill -9: it resumes waiting under the same deadline and goes on when they arrive."""

import pytest

from tests.support import Server, wait_for, wait_for_status

pytestmark = pytest.mark.slow


def test_kill_9_while_waiting_then_restart_the_run_waits_again_and_completes_when_outcomes_arrive(tmp_path):
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/data/codreamer.sqlite", "EXECUTOR_ID": "waiter"}
    server = Server(tmp_path, env).start(timeout=180)
    body = {"iterations": 1, "rollouts_per_group": 2, "scenario_ids": ["scn-healthcare-cto"], "max_turns": 3,
            "feedback_source": "none", "feedback_wait": {"min_delivered": 1, "timeout_s": 3600}}
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json=body).json()["run_id"]
            before = wait_for(lambda: (run := client.get(f"/runs/{run_id}").json())["waiting"] and run, timeout=240)["waiting"]
        server.kill()
        server = Server(tmp_path, env).start(timeout=180)  # the same EXECUTOR_ID: DBOS recovers its workflow
        with server.client() as client:
            again = wait_for(lambda: (run := client.get(f"/runs/{run_id}").json())["status"] == "running" and run, timeout=60)
            assert again["waiting"] == before  # the same wait, the same deadline
            waiting_events = [e for e in client.get(f"/runs/{run_id}/events").json()["data"] if e["type"] == "run.waiting"]
            assert len(waiting_events) == 1  # announced once, not again on recovery
            ref = client.get(f"/runs/{run_id}/iterations/0").json()["email"]["ref"]
            answer = client.post("/outcomes", json={"events": [{"ref": ref, "type": "delivered", "id": "after-restart",
                                                                "occurred_at": "2026-11-20T09:30:00Z", "recipient": "x@example.org"}]})
            assert answer.json()["accepted"] == 1
            run = wait_for_status(client, run_id, timeout=240)
            assert run["status"] == "succeeded" and run["iterations_completed"] == 1 and run["waiting"] is None
    finally:
        server.stop()
