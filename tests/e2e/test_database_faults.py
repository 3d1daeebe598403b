"""Every run ends, whatever the database does: terminated connections, an outage, a worker that dies for good."""

import threading
import time
from urllib.parse import urlsplit

import psycopg
import pytest

from app.kit.db import LISTEN_CHECK_S
from app.knowledge_graph.service import demo_document
from tests.support import (
    FreshPostgresDatabase,
    Server,
    TcpProxy,
    WorkerProcess,
    assert_exactly_once,
    require_postgres,
    wait_for,
    wait_for_status,
)

pytestmark = pytest.mark.slow
RUN = {"iterations": 3, "scenario_ids": [demo_document().scenarios[0].id], "rollouts_per_group": 2, "max_turns": 4}


@pytest.fixture
def database():
    require_postgres()
    database = FreshPostgresDatabase()
    yield database
    database.drop()


def finish_or_resume(client, run_id: str) -> None:
    """A run ends `succeeded`, or `failed` and resumable, never stuck; a resumed one then succeeds."""
    run = wait_for_status(client, run_id, timeout=240)
    if run["status"] == "failed":
        assert "SELECT" not in run["error"]["message"] and "INSERT" not in run["error"]["message"]
        assert client.post(f"/runs/{run_id}/resume").status_code == 202
        wait_for_status(client, run_id, timeout=240)
    assert_exactly_once(client, run_id, RUN["iterations"])


def test_terminated_connections_while_runs_start_and_execute(tmp_path, database):
    server = Server(tmp_path, {"DATABASE_URL": database.url, "EXECUTOR_ID": "terminations"}).start()
    stop, answers = threading.Event(), []

    def terminate_repeatedly():
        with psycopg.connect(database.url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
            while not stop.wait(1.5):
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = %s AND pid <> pg_backend_pid()", (database.name,))

    killer = threading.Thread(target=terminate_repeatedly, daemon=True)
    killer.start()
    try:
        with server.client() as client:
            run_ids = []
            for seed in range(3):
                answer = client.post("/learn-loop", json=RUN | {"seed": seed})
                answers.append(answer.status_code)
                if answer.status_code == 202:
                    run_ids.append(answer.json()["run_id"])
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                answers += [client.get(f"/runs/{run_id}").status_code for run_id in run_ids]
                time.sleep(0.3)
            stop.set()
            killer.join()
            assert set(answers) <= {200, 202, 503}, answers
            assert run_ids, "no run could be started"
            for run_id in run_ids:
                finish_or_resume(client, run_id)
    finally:
        stop.set()
        server.stop()


def test_an_outage_is_a_503_with_retry_after_and_the_api_recovers(tmp_path, database):
    parts = urlsplit(database.url)
    proxy = TcpProxy((parts.hostname, parts.port or 5432))
    via_proxy = database.url.replace(f"{parts.hostname}:{parts.port}", f"127.0.0.1:{proxy.port}")
    server = Server(tmp_path, {"DATABASE_URL": via_proxy, "RUN_WORKER": "false"}).start()
    try:
        with server.client() as client:
            assert client.get("/runs").status_code == 200
            proxy.down()
            # Until the API has seen its listening connection drop, a poll may still be answered from the versions
            # it keeps; that is seconds at most (a silent connection fails its probe within 2 × LISTEN_CHECK_S).
            before_503 = []

            def refused():
                answer = client.get("/runs")
                before_503.append(answer.status_code)
                return answer if answer.status_code == 503 else None

            away = wait_for(refused, timeout=2 * LISTEN_CHECK_S + 5)
            assert set(before_503[:-1]) <= {200}, before_503
            assert away.headers["retry-after"] == "5", away.text
            assert client.get("/readyz").status_code == 503
            proxy.up()
            assert wait_for(lambda: client.get("/runs").status_code == 200, timeout=30)
    finally:
        proxy.down()
        server.stop()


def test_a_dead_worker_never_restarted_hands_its_runs_to_the_live_one(tmp_path, database):
    env = {"DATABASE_URL": database.url, "WORKER_HEARTBEAT_S": "1", "WORKER_TIMEOUT_S": "5",
           "MAX_CONCURRENT_RUNS": "4", "WORKER_CONCURRENCY": "2"}
    api = Server(tmp_path, env | {"RUN_WORKER": "false"}).start()
    doomed = WorkerProcess(tmp_path, env | {"EXECUTOR_ID": "doomed"}).start()
    survivor = WorkerProcess(tmp_path, env | {"EXECUTOR_ID": "survivor"}).start()
    try:
        with api.client() as client:
            run_ids = [client.post("/learn-loop", json=RUN | {"seed": seed}).json()["run_id"] for seed in range(4)]
            # Two per worker: the work spreads, so the doomed worker holds runs when it dies. Each worker starts its
            # model server for its first run first: seconds of CPU, far more beside other busy processes.
            wait_for(lambda: all(client.get(f"/runs/{r}").json()["status"] == "running" for r in run_ids), timeout=180)
            doomed.kill()
            for run_id in run_ids:
                assert wait_for_status(client, run_id, timeout=300)["status"] == "succeeded"
                assert_exactly_once(client, run_id, RUN["iterations"])
        assert "recovered" in survivor.log.read_text()
    finally:
        for process in (survivor, api):
            process.stop()
