"""Faults: kill -9 inside every step, a PostgreSQL restart, a dead judge and a hanging model."""

import time

import pytest

from app.knowledge_graph.service import demo_document
from tests import support
from tests.standins import HangingModel
from tests.support import PrivateCluster, Server, events, free_port, postmaster_started_at, wait_for, wait_for_status

pytestmark = pytest.mark.slow
SCENARIOS = [s.id for s in demo_document().scenarios[:2]]
RUN = {"iterations": 3, "scenario_ids": SCENARIOS, "rollouts_per_group": 3}


def assert_exactly_once(client, run_id: str, iterations: int) -> list[float]:
    """Exactly once, every trajectory kept, and pipelined: each iteration's training lag (returned) is 0 for the first
    iteration of an attempt and at most 1, the default bound, after it."""
    support.assert_exactly_once(client, run_id, iterations)
    lags = []
    for n in range(1, iterations + 1):
        detail = client.get(f"/runs/{run_id}/iterations/{n}").json()
        assert len(detail["trajectories"]) == len(RUN["scenario_ids"]) * RUN["rollouts_per_group"]
        lags.append(detail["training"]["metrics"]["steps_off_policy"])
    assert lags[0] == 0 and set(lags) <= {0, 1} and 1 in lags, lags
    return lags


def test_kill_9_inside_every_step_resumes_exactly_once(tmp_path):
    """One run is killed inside each step in turn; every restart recovers the previous crash first. The run is
    pipelined, so most kills land while the next iteration generates beside the one that trains."""
    env = {"DATABASE_URL": f"sqlite:///{tmp_path}/data/codreamer.sqlite", "EXECUTOR_ID": "fault-worker"}
    run_id = None
    for point in ("generate", "score", "reweight", "train", "email", "publish"):  # the order iteration 2 reaches them
        # a restart recovers the run at once and may reach its crash point before its worker reports ready
        server = Server(tmp_path, env | {"CRASH_AT": f"{point}:2"}).start(wait=run_id is None)
        try:
            if run_id is None:
                with server.client() as client:
                    run_id = client.post("/learn-loop", json=RUN).json()["run_id"]
            wait_for(lambda: server.process.poll() is not None, timeout=120)  # killed at the crash point
        finally:
            server.stop()  # only if it outlived its crash point: the test failed, and must not leave it running
        assert server.process.returncode == -9, point
    server = Server(tmp_path, env).start()
    try:
        with server.client() as client:
            wait_for_status(client, run_id, timeout=120)
            # one attempt, recovered after each kill: every later iteration sampled while the one before trained
            assert assert_exactly_once(client, run_id, RUN["iterations"]) == [0, 1, 1]
    finally:
        server.stop()


def test_postgresql_restart_under_a_running_run(tmp_path):
    """The drill restarts a PostgreSQL cluster of its own (initdb into a temporary folder, its own port), never the
    machine's: that one, which TEST_POSTGRES_URL and other sessions use, keeps running (its start time is unchanged)."""
    shared_started = postmaster_started_at()
    cluster = PrivateCluster()
    server = None
    try:
        server = Server(tmp_path, {"DATABASE_URL": cluster.url, "EXECUTOR_ID": "pg-restart"}).start()
        with server.client() as client:
            run_id = client.post("/learn-loop", json=RUN | {"iterations": 4}).json()["run_id"]
            wait_for(lambda: client.get(f"/runs/{run_id}").json()["iterations_completed"] >= 1, timeout=120)
            before = postmaster_started_at(cluster.url)
            cluster.restart()
            assert postmaster_started_at(cluster.url) > before  # restarted, not left running
            run = wait_for(lambda: _status_after_outage(client, run_id), timeout=180)
            if run["status"] == "failed":  # failed cleanly: resume it
                assert run["error"]["step"] in ("generate", "score", "train", "reweight", "email")
                assert client.post(f"/runs/{run_id}/resume").status_code == 202
                wait_for_status(client, run_id, timeout=180)
            assert_exactly_once(client, run_id, 4)
    finally:
        if server is not None:
            server.stop()
        cluster.remove()
    assert postmaster_started_at() == shared_started  # the machine's own cluster was never restarted


def _status_after_outage(client, run_id):
    try:
        run = client.get(f"/runs/{run_id}").json()
    except Exception:
        return None  # the API itself may answer 5xx/close while the database is down
    return run if run.get("status") in ("succeeded", "failed") else None


@pytest.fixture(scope="module")
def hanging_model():
    model = HangingModel(delay=5)
    yield model
    model.close()


@pytest.fixture(scope="module")
def outage_server(tmp_path_factory, hanging_model):
    workdir = tmp_path_factory.mktemp("outages")
    dead = f"http://127.0.0.1:{free_port()}/v1"
    server = Server(workdir, {
        "DATABASE_URL": f"sqlite:///{workdir}/data/codreamer.sqlite", "BACKEND_RETRIES": "1", "MODEL_TIMEOUT_S": "1",
        "JUDGE_RETRIES": "1", "JUDGE_MODEL": "openai/judge", "JUDGE_BASE_URL": dead, "JUDGE_API_KEY": "k",
        "OPENAI_BASE_URL": hanging_model.base_url, "OPENAI_API_KEY": "k", "OPENAI_MODEL": "slow",
    })
    yield server.start()
    server.stop()


def test_a_dead_judge_fails_the_run_at_the_score_step(outage_server):
    with outage_server.client() as client:
        run_id = client.post("/learn-loop", json=RUN).json()["run_id"]
        run = wait_for_status(client, run_id)
        assert run["status"] == "failed" and run["error"]["step"] == "score"
        assert "dropped" in run["error"]["message"]
        assert [i["iteration"] for i in client.get(f"/runs/{run_id}/iterations").json()["data"]] == [0]
        assert events(client, run_id)[-1]["type"] == "run.failed"


def test_a_hanging_model_times_out_with_bounded_retries(outage_server, hanging_model):
    with outage_server.client() as client:
        started = time.monotonic()
        run_id = client.post("/learn-loop", json=RUN | {"backend": "openai"}).json()["run_id"]
        run = wait_for_status(client, run_id)
        assert run["status"] == "failed" and run["error"]["step"] == "start"  # the preflight's request
        assert "Timeout" in run["error"]["message"]
        assert hanging_model.calls == 2 and time.monotonic() - started < 30
        assert client.get(f"/runs/{run_id}/iterations").json()["data"] == []
