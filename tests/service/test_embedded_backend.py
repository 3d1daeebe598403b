"""The embedded backend through ART's own entry points, over real HTTP on loopback."""

import json
import os
import signal

import art
import httpx
import numpy as np
import pytest
from art.rewards import ruler_score_group
from openai import AsyncOpenAI

from app.agent.prompt import initial_messages
from app.agent.tools import TOOLS
from app.kit import supervision
from app.knowledge_graph.service import demo_graph
from app.loop.rollout import rollout
from tests.support import process_gone, wait_until


async def _groups(model, scenario_ids, k=4):
    graph = demo_graph()
    client = AsyncOpenAI(base_url=model.inference_base_url, api_key=model.inference_api_key)
    scores = dict(graph.initial_scores)
    groups = []
    for sid in scenario_ids:
        trajectories = [
            await rollout(client, model.get_inference_name(), graph, graph.scenarios[sid], scores, max_turns=6, seed=i * 64)
            for i in range(k)
        ]
        groups.append(art.TrajectoryGroup(trajectories))
    return groups


async def test_register_train_get_step_delete_checkpoints(backend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = art.TrainableModel(name="contract", project="codreamer-test", base_model="embedded", report_metrics=[])
    await model.register(backend)
    assert model.inference_base_url.startswith("http://127.0.0.1:")
    assert await model.get_step() == 0
    assert model.get_inference_name() == "contract@0"

    groups = await _groups(model, list(demo_graph().scenarios)[:2])
    for i, group in enumerate(groups):
        for j, t in enumerate(group.trajectories):
            t.reward = float(j)  # a spread so every group carries signal
    flat = art.TrajectoryGroup([t.model_copy() for t in groups[0].trajectories])
    for t in flat.trajectories:
        t.reward = 0.5
    result = await backend.train(model, [*groups, flat], learning_rate=0.05)
    assert isinstance(result, art.types.TrainResult)
    assert result.step == 1 and await model.get_step() == 1
    assert result.metrics["groups_trained"] == 2 and result.metrics["groups_skipped"] == 1
    for key in ("loss", "kl", "clip_fraction", "grad_norm"):
        assert np.isfinite(result.metrics[key])
    assert model.get_inference_name() == "contract@1"

    result = await backend.train(model, groups, learning_rate=0.05)
    assert result.step == 2
    async with httpx.AsyncClient(base_url=model.inference_base_url, headers={"Authorization": f"Bearer {model.inference_api_key}"}) as http:
        served = {m["id"] for m in (await http.get("/models")).json()["data"]}
        assert {"contract@0", "contract@1", "contract@2"} <= served
        await model.delete_checkpoints()  # keeps the latest (and step 0, the KL reference)
        served = {m["id"] for m in (await http.get("/models")).json()["data"]}
        assert "contract@1" not in served and {"contract@0", "contract@2"} <= served
        missing = await http.post("/chat/completions", json={"model": "contract@1", "messages": [{"role": "user", "content": "x"}], "tools": TOOLS})
        assert missing.status_code == 404 and "no checkpoint" in missing.json()["error"]["message"]


async def test_chat_completions_speaks_openai(backend):
    model = art.TrainableModel(name="wire", project="p", base_model="embedded", report_metrics=[])
    await model.register(backend)
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    client = AsyncOpenAI(base_url=model.inference_base_url, api_key=model.inference_api_key)
    response = await client.chat.completions.create(
        model=model.get_inference_name(), messages=initial_messages(graph, scenario, graph.initial_scores, 6),
        tools=TOOLS, logprobs=True, seed=3,
    )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name in {t["function"]["name"] for t in TOOLS}
    json.loads(call.function.arguments)
    assert choice.logprobs.content and all(t.logprob <= 0 for t in choice.logprobs.content)
    assert response.usage.completion_tokens == len(choice.logprobs.content) and response.usage.prompt_tokens > 0

    greedy = [
        (await client.chat.completions.create(model=model.get_inference_name(), messages=initial_messages(graph, scenario, graph.initial_scores, 6), tools=TOOLS, temperature=0)).choices[0].message.tool_calls[0].function.arguments
        for _ in range(2)
    ]
    assert greedy[0] == greedy[1]

    wrong_key = AsyncOpenAI(base_url=model.inference_base_url, api_key="nope", max_retries=0)
    with pytest.raises(Exception, match="401"):
        await wrong_key.chat.completions.create(model=model.get_inference_name(), messages=[{"role": "user", "content": "hi"}])
    async with httpx.AsyncClient(base_url=model.inference_base_url, headers={"Authorization": f"Bearer {model.inference_api_key}"}) as http:
        for body in ({"model": "wire"}, {"model": "nobody", "messages": [{"role": "user", "content": "x"}], "tools": TOOLS},
                     {"model": "wire", "messages": [{"role": "user", "content": "x"}]}):
            response = await http.post("/chat/completions", json=body)
            assert response.status_code in (400, 404) and response.json()["error"]["message"]
        response = await http.post("/chat/completions", content=b"{not json")
        assert response.status_code == 400


async def test_ruler_scores_through_the_embedded_judge(backend):
    model = art.TrainableModel(name="judged", project="p", base_model="embedded", report_metrics=[])
    await model.register(backend)
    [group] = await _groups(model, list(demo_graph().scenarios)[:1], k=4)
    judged = await ruler_score_group(
        group, f"openai/{backend.judge_model_name}", {"api_base": backend.base_url, "api_key": backend.api_key},
    )
    assert judged is not None and len(judged.trajectories) == 4
    assert all(0.0 <= t.reward <= 1.0 for t in judged.trajectories)
    assert any("grounding" in log for t in judged.trajectories for log in t.logs)
    # All-identical groups: RULER sends one trajectory and expects one score back.
    same = art.TrajectoryGroup([group.trajectories[0].model_copy() for _ in range(3)])
    judged_same = await ruler_score_group(same, f"openai/{backend.judge_model_name}", {"api_base": backend.base_url, "api_key": backend.api_key})
    assert len({t.reward for t in judged_same.trajectories}) == 1


async def test_close_stops_the_server_and_leaves_the_process(backend):
    model = art.TrainableModel(name="closing", project="p", base_model="embedded", report_metrics=[])
    await model.register(backend)
    url = model.inference_base_url
    await backend.close()
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as http:
            await http.get(f"{url}/models")


async def test_the_model_server_runs_in_its_own_process_and_stops_with_the_backend(backend):
    model = art.TrainableModel(name="apart", project="p", base_model="embedded", report_metrics=[])
    await model.register(backend)
    pid = await backend.server_pid()
    assert pid != os.getpid() and not process_gone(pid)
    await backend.close()
    assert process_gone(pid)


async def test_a_model_server_that_dies_is_restarted_with_every_checkpoint(backend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = art.TrainableModel(name="phoenix", project="p", base_model="embedded", report_metrics=[])
    await model.register(backend)
    groups = await _groups(model, list(demo_graph().scenarios)[:1], k=3)
    for j, t in enumerate(groups[0].trajectories):
        t.reward = float(j)
    assert (await backend.train(model, groups)).step == 1
    pid = await backend.server_pid()
    os.kill(pid, signal.SIGKILL)
    await wait_until(lambda: process_gone(pid))
    assert await backend.server_pid() != pid  # the request waited in the socket's backlog for the new server
    async with httpx.AsyncClient(base_url=backend.base_url, headers={"Authorization": f"Bearer {backend.api_key}"}) as http:
        served = {m["id"] for m in (await http.get("/models")).json()["data"]}
    assert {"phoenix@0", "phoenix@1"} <= served
    assert (await backend.train(model, groups)).step == 2


async def test_a_model_server_that_keeps_dying_is_restarted_after_a_pause_not_given_up(backend, monkeypatch):
    """Killed more often than RESTARTS_PER_MINUTE, it says why it is down (readiness reports it) and comes back."""
    monkeypatch.setattr(supervision, "MAX_PAUSE_S", 2.0)
    model = art.TrainableModel(name="lazarus", project="p", base_model="embedded", report_metrics=[])
    await model.register(backend)
    pids = []
    for _ in range(supervision.RESTARTS_PER_MINUTE + 2):
        pids.append(await backend.server_pid())  # waits in the backlog for each new server
        assert pids[-1] not in pids[:-1]
        os.kill(pids[-1], signal.SIGKILL)
        await wait_until(lambda: process_gone(pids[-1]))
    await wait_until(lambda: backend.problem() is not None)
    assert "exited" in backend.problem() and "restarted in" in backend.problem()
    assert await backend.server_pid() not in pids  # it came back: a request made while it was down waited for it
    # the server answers from the moment it listens; it says "ready" on its pipe a moment later
    await wait_until(lambda: backend.problem() is None)


