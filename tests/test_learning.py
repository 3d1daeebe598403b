"""The policy measurably improves on the embedded default, and only because it learns."""

import json

import numpy as np
import pytest

from app.knowledge_graph.schemas import GraphDocument
from app.runs.schemas import LearnLoopRequest


def mean_reward(learned, iterations):
    return float(np.mean([learned.rewards(i) for i in iterations]))


@pytest.mark.slow
async def test_demo_rewards_rise_with_learning_and_not_without(learn):
    learned = await learn(LearnLoopRequest(iterations=10, rollouts_per_group=4, seed=0))
    frozen = await learn(LearnLoopRequest(iterations=10, rollouts_per_group=4, seed=0, train_policy=False, reweight_graph=False))

    assert learned.run["status"] == "succeeded"
    assert [r["iteration"] for r in learned.iterations] == list(range(11))
    assert learned.iterations[10]["training"]["step"] == 10
    assert mean_reward(learned, [8, 9, 10]) >= 1.2 * learned.rewards(1)
    # Same seed, same first iteration: the rise comes from learning, not from luck.
    assert frozen.rewards(1) == pytest.approx(learned.rewards(1))
    assert mean_reward(frozen, [8, 9, 10]) < 1.1 * frozen.rewards(1)
    assert frozen.run["config"]["train_policy"] is False and frozen.run["config"]["reweight_graph"] is False
    assert all(r["training"]["skipped"] for r in frozen.iterations[1:])
    assert all(r["node_scores_changed"] == {} for r in frozen.iterations)


@pytest.mark.slow
async def test_same_seed_same_run(learn):
    request = LearnLoopRequest(iterations=2, rollouts_per_group=3, seed=7)
    first, second = await learn(request), await learn(request)
    for a, b in zip(first.iterations, second.iterations, strict=True):
        assert (a["rewards"], a["email"], a["node_scores_changed"]) == (b["rewards"], b["email"], b["node_scores_changed"])
        assert [t["reward"] for t in a["trajectories"]] == [t["reward"] for t in b["trajectories"]]


def synthetic_document(seed: int) -> GraphDocument:
    """A graph in no way like the demo: random vocabulary, ids and structure; judge-only rewards."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}x" for i in range(120)]
    nodes = []
    for i in range(40):
        words = rng.choice(vocab, 12, replace=False)
        nodes.append({"id": f"n{i}", "type": f"t{i % 5}", "title": " ".join(words[:3]),
                      "text": f"{' '.join(words[:6])}. {' '.join(words[6:])}.", "tags": list(words[:3])})
    edges = [{"source": f"n{i}", "target": f"n{j}", "relation": "r"}
             for i in range(40) for j in rng.choice(40, 3, replace=False) if i != j]
    edges = list({(e["source"], e["target"]): e for e in edges}.values())
    scenarios = []
    for s in range(4):
        pains = [" ".join(rng.choice(vocab, 2, replace=False)) for _ in range(3)]
        scenarios.append({"id": f"s{s}", "goal": "book a call", "seed_nodes": [f"n{s}", f"n{s + 10}"],
                          "prospect": {"name": f"P{s} Q", "role": str(rng.choice(vocab)), "company": f"C{s}",
                                       "industry": str(rng.choice(vocab)), "pains": pains}})
    return GraphDocument.model_validate_json(json.dumps(
        {"id": f"synthetic-{seed}", "name": "synthetic", "nodes": nodes, "edges": edges, "scenarios": scenarios}))


@pytest.mark.slow
async def test_learning_works_on_an_uploaded_graph_without_feedback(learn):
    document = synthetic_document(3)
    learned = await learn(LearnLoopRequest(graph_id=document.id, iterations=8, rollouts_per_group=4, seed=1), document)
    rewards = [learned.rewards(i) for i in range(1, 9)]
    assert all(t["feedback_score"] is None for t in learned.iterations[1]["trajectories"])
    assert np.mean(rewards[-3:]) >= 1.15 * rewards[0]
