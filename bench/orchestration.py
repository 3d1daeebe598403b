"""Orchestration efficiency: one iteration against latency-injected model, judge and trainer.

The model and judge are a real OpenAI-compatible server on loopback that waits a fixed time per
call; training waits a fixed time. The critical-path bound is what a perfectly concurrent
orchestrator would take: ceil(S·K / concurrency) rollout waves of T model calls, then the last
group's judge call, then training. The seed's pipeline shape generates all groups concurrently,
then judges them one group after another, then trains.
"""

import asyncio
import math
import time
from dataclasses import dataclass

import art
import numpy as np
from art.types import TrainResult
from fastapi import FastAPI

from app.agent.transcript import parse_transcript
from app.backends.embedded.judge import judge
from app.backends.embedded.policy import plan_turn
from app.backends.embedded.server import LoopbackServer
from app.knowledge_graph.service import demo_graph
from app.loop.generation import Policy, generate
from app.loop.reward import Judge, Scorer
from app.loop.schemas import RunConfig
from app.loop.training import train


@dataclass
class Latencies:
    model_s: float = 0.5
    judge_s: float = 2.0
    train_s: float = 3.0


def _explorer(rng: np.random.Generator):
    """Never finishes early, so every rollout makes exactly T model calls; explores at random."""

    def choose(block, features, labels):
        if block == "action":
            return next((i for i, label in enumerate(labels) if label != "act=finalize_email"), 0)
        return int(rng.integers(len(labels)))

    return choose


def latency_server(latencies: Latencies) -> LoopbackServer:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(body: dict) -> dict:
        if body["model"] == "judge":
            await asyncio.sleep(latencies.judge_s)
            message = {"role": "assistant", "content": __import__("json").dumps(judge(body["messages"]))}
            return _completion(body, message, "stop")
        await asyncio.sleep(latencies.model_s)
        call, _ = plan_turn(parse_transcript(body["messages"]), _explorer(np.random.default_rng(body.get("seed"))))
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_{len(body['messages'])}", "type": "function",
            "function": {"name": call["name"], "arguments": __import__("json").dumps(call["arguments"])},
        }]}
        return _completion(body, message, "tool_calls")

    server = LoopbackServer(app)
    server.start()
    return server


def _completion(body, message, finish_reason):
    return {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class FixedDelayBackend:
    """The ART backend members the loop uses: inference on the latency server, training that takes
    exactly `train_s`, so only orchestration differs between the two shapes."""

    def __init__(self, base_url: str, seconds: float):
        self.base_url, self.seconds, self.step = base_url, seconds, 0

    async def register(self, model) -> None:
        pass

    async def _prepare_backend_for_training(self, model, config) -> tuple[str, str]:
        return self.base_url, "k"

    def _model_inference_name(self, model, step=None) -> str:
        return "policy"

    async def _get_step(self, model) -> int:
        return self.step

    async def train(self, model, groups, **kwargs) -> TrainResult:
        await asyncio.sleep(self.seconds)
        self.step += 1
        return TrainResult(step=self.step)

    async def close(self) -> None:
        pass


async def _iteration(shape: str, policy, judge_cfg, scenarios, *, k, turns, concurrency, backend) -> float:
    graph = demo_graph()
    config = RunConfig(rollouts_per_group=k, max_turns=turns, seed=0, feedback_weight=0.0)
    score = Scorer(judge_cfg, None, config, iteration=1)
    scores = {scenario.id: graph.initial_scores for scenario in scenarios}
    started = time.monotonic()
    if shape == "ours":
        generation = await generate(policy, graph, scenarios, scores, config, iteration=1, concurrency=concurrency, score=score)
        groups = generation.groups
    else:  # the seed: generate everything, then judge group after group
        async def passthrough(group):
            return group

        generation = await generate(policy, graph, scenarios, scores, config, iteration=1, concurrency=concurrency, score=passthrough)
        groups = [await score(g) for g in generation.groups]
    await train(backend, policy.model, groups, config, step_before=backend.step, retries=0)
    return time.monotonic() - started


async def measure(s: int = 8, k: int = 4, t: int = 4, concurrency: int = 32, latencies: Latencies | None = None) -> dict:
    latencies = latencies or Latencies()
    server = latency_server(latencies)
    try:
        backend = FixedDelayBackend(server.base_url, latencies.train_s)
        model = art.TrainableModel(name="bench", project="bench", base_model="bench", report_metrics=[])
        await model.register(backend)
        policy = Policy.of(model)
        judge_cfg = Judge("openai/judge", {"api_base": server.base_url, "api_key": "k"}, retries=0)
        scenarios = list(demo_graph().scenarios.values())
        scenarios = (scenarios * math.ceil(s / len(scenarios)))[:s]
        bound = math.ceil(s * k / concurrency) * t * latencies.model_s + latencies.judge_s + latencies.train_s
        seed_model = t * latencies.model_s + s * latencies.judge_s + latencies.train_s
        runs = {}
        for shape in ("ours", "seed"):
            times = [await _iteration(shape, policy, judge_cfg, scenarios, k=k, turns=t, concurrency=concurrency,
                                      backend=backend) for _ in range(2)]
            runs[shape] = min(times)
        await policy.client.close()
    finally:
        server.stop()
    return {
        "scenarios": s, "rollouts_per_group": k, "turns": t, "concurrency": concurrency,
        "latency_model_s": latencies.model_s, "latency_judge_s": latencies.judge_s, "training_s": latencies.train_s,
        "bound_s": bound, "ours_s": runs["ours"], "seed_shape_s": runs["seed"], "seed_shape_model_s": seed_model,
        "ratio_to_bound": runs["ours"] / bound, "speedup_over_seed": runs["seed"] / runs["ours"],
    }
