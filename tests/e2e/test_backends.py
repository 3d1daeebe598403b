"""The same service trains through other backends, each against a loopback server speaking its protocol."""

import subprocess
import sys

import art
import pytest

from app.backends.embedded import EmbeddedBackend
from app.knowledge_graph.service import demo_document
from tests.standins import SwitchableProxy, WandbTrainingStandIn
from tests.support import Server, events, wait_for_status

pytestmark = pytest.mark.slow
SCENARIO = demo_document().scenarios[0].id
WANDB_KEY = "k" * 40


@pytest.fixture(scope="module")
def openai_compatible():
    """The embedded model server, run on its own: any OpenAI-compatible endpoint would do."""
    import asyncio

    backend = EmbeddedBackend()
    model = art.TrainableModel(name="standin", project="p", base_model="embedded", report_metrics=[])
    asyncio.run(model.register(backend))
    proxy = SwitchableProxy(backend.base_url)  # lets a test take the model endpoint down
    yield proxy, backend.api_key, "standin@0"
    proxy.close()
    asyncio.run(backend.close())


@pytest.fixture(scope="module")
def wandb_training():
    standin = WandbTrainingStandIn(WANDB_KEY)
    yield standin
    standin.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory, openai_compatible, wandb_training):
    workdir = tmp_path_factory.mktemp("backends")
    # The key comes from .env, as a user's would: ART reports to W&B only for a key in the process
    # environment, which would need the real W&B API.
    (workdir / ".env").write_text(f"WANDB_API_KEY={WANDB_KEY}\n")
    proxy, api_key, model = openai_compatible
    server = Server(workdir, {
        "DATABASE_URL": f"sqlite:///{workdir}/data/codreamer.sqlite", "OPENAI_BASE_URL": proxy.base_url,
        "OPENAI_API_KEY": api_key, "OPENAI_MODEL": model, "ART_SERVERLESS_BASE_URL": wandb_training.base_url,
        "BACKEND_RETRIES": "1",
    })
    yield server.start()
    server.stop()


def test_openai_backend_generates_judges_and_reweights_without_training(server):
    with server.client() as client:
        assert client.post("/learn-loop", json={"backend": "openai", "learning_rate": 1e-5}).status_code == 422
        assert client.post("/learn-loop", json={"backend": "openai", "train_options": {"epochs": 2}}).status_code == 422
        created = client.post("/learn-loop", json={"backend": "openai", "iterations": 2, "scenario_ids": [SCENARIO], "rollouts_per_group": 3})
        assert created.status_code == 202, created.text
        run = wait_for_status(client, created.json()["run_id"])
        assert run["status"] == "succeeded", run
        assert run["config"]["backend"] == "openai" and run["config"]["learning_rate"] is None
        iterations = client.get(f"/runs/{run['run_id']}/iterations").json()["data"]
        assert all(i["training"]["skipped"] and "fixed model" in i["training"]["reason"] for i in iterations[1:])
        assert any(i["node_scores_changed"] for i in iterations[1:])  # the knowledge graph still learns
        assert all(i["rewards"]["count"] == 3 for i in iterations[1:])


def test_serverless_backend_trains_through_the_wandb_training_protocol(server, wandb_training):
    with server.client() as client:
        bad = client.post("/learn-loop", json={"backend": "serverless", "train_options": {"epochs": 3}})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "train_options", "epochs"]
        created = client.post("/learn-loop", json={
            "backend": "serverless", "iterations": 2, "scenario_ids": [SCENARIO], "rollouts_per_group": 4,
            "train_options": {"ppo": True, "epsilon": 0.1},
        })
        assert created.status_code == 202, created.text
        run = wait_for_status(client, created.json()["run_id"])
        assert run["status"] == "succeeded", run
        assert run["config"]["learning_rate"] == 5e-6 and run["config"]["train_options"]["ppo"] is True
        iterations = client.get(f"/runs/{run['run_id']}/iterations").json()["data"]
        assert [i["training"]["step"] for i in iterations[1:]] == [1, 2]
        details = [client.get(f"/runs/{run['run_id']}/iterations/{n}").json() for n in (1, 2)]

    assert len(wandb_training.training_jobs) == 2
    for job, detail in zip(wandb_training.training_jobs, details):
        assert job["experimental_config"]["learning_rate"] == 5e-6 and job["experimental_config"]["ppo"] is True
        sent = [t for g in job["trajectory_groups"] for t in g["trajectories"]]
        assert sent and all("judge_score" in t["metrics"] for t in sent)  # scored groups, not raw rollouts
        assert sorted(t["reward"] for t in sent) == sorted(t["reward"] for t in detail["trajectories"])
    assert all(name.startswith("wandb-artifact:///") for name in wandb_training.inference_models)


def test_backends_that_cannot_run_here_are_refused_with_what_to_do(server, tmp_path):
    with server.client() as client:
        for backend, hint in (("local", "codreamer[local]"), ("tinker", "codreamer[tinker]")):
            response = client.post("/learn-loop", json={"backend": backend})
            assert response.status_code == 422 and hint in response.json()["detail"][0]["msg"]
    result = subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "serve", "--port", "1"],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "MODEL_BACKEND": "local", "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1 and "codreamer[local]" in result.stdout + result.stderr


def test_a_model_outage_fails_the_run_cleanly_and_it_can_be_resumed(server, openai_compatible):
    proxy = openai_compatible[0]
    proxy.down = True
    try:
        with server.client() as client:
            run_id = client.post("/learn-loop", json={"backend": "openai", "iterations": 2, "scenario_ids": [SCENARIO], "rollouts_per_group": 2}).json()["run_id"]
            run = wait_for_status(client, run_id)
            assert run["status"] == "failed"
            assert run["error"]["step"] == "start" and "(503)" in run["error"]["message"]  # the preflight request
            assert proxy.refused == 2  # the first call and BACKEND_RETRIES=1 retry: bounded
            assert client.get(f"/runs/{run_id}/iterations").json()["data"] == []  # nothing half-written
            assert events(client, run_id)[-1]["type"] == "run.failed"
            assert client.post(f"/runs/{run_id}/resume").status_code == 202
            proxy.down = False
            run = wait_for_status(client, run_id)
            assert run["status"] == "succeeded" and run["error"] is None, run
            assert [i["iteration"] for i in client.get(f"/runs/{run_id}/iterations").json()["data"]] == [0, 1, 2]
            assert [e["data"].get("attempt") for e in events(client, run_id) if e["type"] == "run.started"] == [1, 2]
            assert client.post(f"/runs/{run_id}/resume").status_code == 409
    finally:
        proxy.down = False
