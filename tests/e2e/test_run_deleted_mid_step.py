"""A run cancelled and deleted while its worker is generating for it: what the step then writes references a run that
is gone, and that is the deletion, not a failure to report with a traceback and the SQL parameters of the rows
(issue 37, finding 7). `codreamer serve` with its worker process; the embedded model answers slowly, so the step is
in flight when the run goes."""

import sqlite3

import pytest

from app.knowledge_graph.service import demo_document
from tests.support import Server, wait_for

pytestmark = pytest.mark.slow
BODY = {"iterations": 3, "rollouts_per_group": 2, "scenario_ids": [demo_document().scenarios[0].id], "max_turns": 2}


def recorded_steps(dbos_file, run_id: str) -> list[str]:
    try:
        with sqlite3.connect(f"file:{dbos_file}?mode=ro", uri=True) as db:
            return [name for (name,) in db.execute("SELECT function_name FROM operation_outputs WHERE workflow_uuid = ?", (run_id,))]
    except sqlite3.OperationalError:  # not created yet, or busy
        return []


def test_a_run_cancelled_and_deleted_while_it_generates_is_one_line(tmp_path):
    server = Server(tmp_path, {"DATABASE_URL": f"sqlite:///{tmp_path}/data/codreamer.sqlite", "EXECUTOR_ID": "deleted-mid-step",
                               "LATENCY_AT": "model:1.0", "PYTHONUNBUFFERED": "1"}).start()
    dbos_file = tmp_path / "data" / "codreamer-dbos.sqlite"
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json=BODY).json()["run_id"]
            # iteration 0 (the baseline email) published and its simulated send recorded: iteration 1's generate step,
            # two turns of a second each, is in flight
            wait_for(lambda: "send" in recorded_steps(dbos_file, run_id), timeout=120, interval=0.05)
            assert client.post(f"/runs/{run_id}/cancel").status_code == 202
            assert client.delete(f"/runs/{run_id}").status_code == 204
            # the worker logs this once the step in flight has ended and the workflow met the cancel
            wait_for(lambda: f"run {run_id} cancelled" in server.log.read_text(), timeout=120)
            assert "generate" not in recorded_steps(dbos_file, run_id)  # it ended without a recorded outcome
            assert client.get(f"/runs/{run_id}").status_code == 404
    finally:
        server.stop()
    log = server.log.read_text()
    assert "Traceback" not in log and "[parameters:" not in log and "IntegrityError" not in log, log[-3000:]
    mentions = [line for line in log.splitlines() if run_id in line]
    assert len(mentions) == 1 and f"run {run_id} cancelled" in mentions[0], log[-3000:]
