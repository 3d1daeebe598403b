"""In a split deployment (an API process and workers on machines of their own, as compose runs it), deleting a run
removes what ART wrote for it on the worker's disk too: its logged conversations."""

import pytest

from app.knowledge_graph.service import demo_document
from tests.support import FreshPostgresDatabase, Server, WorkerProcess, require_postgres, wait_for, wait_for_status

pytestmark = pytest.mark.slow

RUN = {"iterations": 1, "scenario_ids": [demo_document().scenarios[0].id], "rollouts_per_group": 2, "max_turns": 3,
       "feedback_source": "none"}


@pytest.fixture
def database():
    require_postgres()
    database = FreshPostgresDatabase()
    yield database
    database.drop()


def test_a_deleted_runs_conversations_leave_the_workers_disk(tmp_path, database):
    env = {"DATABASE_URL": database.url, "WORKER_HEARTBEAT_S": "1"}
    (tmp_path / "api").mkdir()
    (tmp_path / "worker").mkdir()
    api = Server(tmp_path / "api", env | {"RUN_WORKER": "false"}).start()
    worker = WorkerProcess(tmp_path / "worker", env | {"EXECUTOR_ID": "split-worker"}).start()
    try:
        with api.client() as client:
            run_id = client.post("/learn-loop", json=RUN).json()["run_id"]
            assert wait_for_status(client, run_id, timeout=300)["status"] == "succeeded"
            folder = tmp_path / "worker" / ".art" / "codreamer" / "models" / f"model-{run_id}"
            assert wait_for(folder.is_dir, timeout=30)
            kept = client.post("/learn-loop", json=RUN | {"seed": 1}).json()["run_id"]
            assert wait_for_status(client, kept, timeout=300)["status"] == "succeeded"
            assert client.delete(f"/runs/{run_id}").status_code == 204
            wait_for(lambda: not folder.exists(), timeout=60)
            assert (folder.parent / f"model-{kept}").is_dir()  # only the deleted run's folder goes
    finally:
        worker.stop()
        api.stop()
