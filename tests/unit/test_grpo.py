"""GRPO on the embedded policy: advantages, clipping, KL and the direction of the update."""

import json

import art
import httpx
import numpy as np
import pytest
from openai import AsyncOpenAI

from app.backends.embedded.grpo import group_samples, grpo_update
from app.backends.embedded.policy import Checkpoint, logprob_and_grad
from app.backends.embedded.server import policy_turn
from app.knowledge_graph.service import demo_graph
from app.loop.rollout import rollout


def policy_client(checkpoint: Checkpoint) -> AsyncOpenAI:
    """An OpenAI client whose requests the policy answers in this process: the model server's chat
    turn (`policy_turn`) without the server, so the rollouts are the ones it would serve."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        message, tokens = policy_turn(checkpoint, body)
        return httpx.Response(200, json={
            "id": "chatcmpl-unit", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls",
                         "logprobs": {"content": tokens} if body.get("logprobs") else None}],
            "usage": {"prompt_tokens": 1, "completion_tokens": len(tokens), "total_tokens": 1 + len(tokens)},
        })

    return AsyncOpenAI(base_url="http://policy.invalid/v1", api_key="unit",
                       http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)))


@pytest.fixture(scope="module")
async def group():
    """Eight real rollouts of one scenario from the initial policy (read, never changed, by the tests)."""
    graph = demo_graph()
    scenario = next(iter(graph.scenarios.values()))
    client = policy_client(Checkpoint.initial())
    trajectories = [
        await rollout(client, "grpo@0", graph, scenario, graph.initial_scores, max_turns=6, seed=i * 64) for i in range(8)
    ]
    await client.close()
    for t in trajectories:  # reward long explorations: a preference the initial policy does not have
        t.reward = float(t.turns)
    assert len({t.reward for t in trajectories}) > 1
    return art.TrajectoryGroup(trajectories)


def total_logprob(weights, sample):
    return sum(logprob_and_grad(weights, d)[0] for d in sample.decisions)


def update(samples, **overrides):
    options = dict(learning_rate=0.05, epsilon=0.2, epsilon_high=0.2, kl_penalty_coef=0.0, epochs=2) | overrides
    initial = Checkpoint.initial()
    return grpo_update(initial, initial.weights, samples, **options)


def test_recorded_logprobs_are_the_policys(group):
    samples, trained, skipped = group_samples([group], scale_rewards=True)
    weights = Checkpoint.initial().weights
    for sample in samples:
        recomputed = [logprob_and_grad(weights, d)[0] for d in sample.decisions]
        assert recomputed == pytest.approx(sample.old_logprobs, abs=1e-9)


def test_advantages_are_group_relative(group):
    rewards = np.array([t.reward for t in group.trajectories])
    scaled, _, _ = group_samples([group], scale_rewards=True)
    raw, _, _ = group_samples([group], scale_rewards=False)
    expected = rewards - rewards.mean()
    nonzero = expected[expected != 0]
    assert [s.advantage for s in raw] == pytest.approx(list(nonzero))
    assert [s.advantage for s in scaled] == pytest.approx(list(nonzero / (rewards.std() + 1e-6)))


def test_zero_variance_groups_are_skipped_and_counted(group):
    flat = art.TrajectoryGroup([t.model_copy(update={"reward": 0.3}) for t in group.trajectories])
    samples, trained, skipped = group_samples([group, flat], scale_rewards=True)
    assert (trained, skipped) == (1, 1)
    assert len(samples) == sum(1 for t in group.trajectories if t.reward != np.mean([x.reward for x in group.trajectories]))


def test_update_makes_better_trajectories_more_likely(group):
    samples, _, _ = group_samples([group], scale_rewards=True)
    checkpoint, metrics = update(samples)
    before = Checkpoint.initial().weights
    # The GRPO surrogate: advantage-weighted change of each trajectory's mean decision logprob.
    surrogate = sum(
        sample.advantage * (total_logprob(checkpoint.weights, sample) - total_logprob(before, sample)) / len(sample.decisions)
        for sample in samples
    )
    assert surrogate > 0
    best = max(samples, key=lambda s: s.advantage)
    assert total_logprob(checkpoint.weights, best) > total_logprob(before, best)
    assert metrics["kl"] > 0 and np.isfinite(metrics["loss"])


def test_learning_rate_zero_changes_nothing(group):
    samples, _, _ = group_samples([group], scale_rewards=True)
    checkpoint, _ = update(samples, learning_rate=0.0)
    for block, weights in Checkpoint.initial().weights.items():
        assert np.array_equal(checkpoint.weights[block], weights)


def test_ratio_is_clipped_after_large_steps(group):
    samples, _, _ = group_samples([group], scale_rewards=True)
    _, gentle = update(samples, learning_rate=0.01, epochs=2)
    _, aggressive = update(samples, learning_rate=1.0, epochs=4)
    assert gentle["clip_fraction"] == 0.0
    assert aggressive["clip_fraction"] > 0.0


def test_kl_penalty_keeps_the_policy_near_the_reference(group):
    samples, _, _ = group_samples([group], scale_rewards=True)
    _, free = update(samples, learning_rate=0.3, epochs=4)
    _, anchored = update(samples, learning_rate=0.3, epochs=4, kl_penalty_coef=5.0)
    assert anchored["kl"] < free["kl"]


def test_checkpoints_round_trip_through_bytes(group):
    samples, _, _ = group_samples([group], scale_rewards=True)
    checkpoint, _ = update(samples)
    restored = Checkpoint.from_bytes(checkpoint.to_bytes())
    assert restored.updates == checkpoint.updates
    for block in checkpoint.weights:
        assert np.array_equal(restored.weights[block], checkpoint.weights[block])
        assert np.array_equal(restored.v[block], checkpoint.v[block])
