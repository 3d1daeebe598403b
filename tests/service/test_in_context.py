"""Learning for a model that cannot be trained: each iteration distils what worked (the best email so
far and the judge's lessons, per scenario) into the next iteration's prompts. Against a recording
OpenAI-compatible stand-in, through the service's workflow. Also: every published email carries its
judge score, and the run's final email is the best-scoring one."""

import pytest

from app.agent.schemas import Email
from app.agent.transcript import parse_transcript
from app.knowledge_graph.service import demo_document
from app.loop.reward import rollout_seed
from app.runs.schemas import LearnLoopRequest
from tests.standins import RecordingModel

SCENARIOS = [s.id for s in demo_document().scenarios[:2]]
SEED, K, ITERATIONS = 5, 3, 3


@pytest.mark.slow
async def test_each_prompt_of_a_fixed_model_carries_what_the_previous_iteration_learned(learn):
    model = RecordingModel()
    try:
        learned = await learn(
            LearnLoopRequest(backend="openai", iterations=ITERATIONS, rollouts_per_group=K, seed=SEED, scenario_ids=SCENARIOS),
            openai_base_url=model.base_url, openai_model="fixed-model", openai_api_key="sk-test",
        )
    finally:
        model.close()
    run, records = learned.run, learned.iterations
    assert run["status"] == "succeeded", run
    assert run["config"]["in_context"] is True  # the default for a backend that cannot train
    assert all(r["training"]["skipped"] for r in records[1:])
    assert records[0]["context"] is None
    for record in records[1:]:
        assert set(record["context"]) == set(SCENARIOS)
    assert any(record["context"][s]["playbook"] for record in records[1:] for s in SCENARIOS)

    first_turns = {body["seed"]: body for body in model.requests if body.get("seed") is not None and len(body["messages"]) == 2}
    for n in range(1, ITERATIONS + 1):
        for scenario in SCENARIOS:
            for k in range(K):
                prompt = parse_transcript(first_turns[rollout_seed(SEED, n, scenario, k) + 1]["messages"])
                if n == 1:
                    assert prompt.exemplar is None and prompt.playbook == []
                    continue
                learned_before = records[n - 1]["context"][scenario]  # what iteration n-1 distilled
                exemplar = learned_before["exemplar"]
                assert prompt.exemplar == Email(subject=exemplar["subject"], body=exemplar["body"], citations=exemplar["citations"])
                assert prompt.playbook == learned_before["playbook"]
                assert set(exemplar["citations"]) <= set(prompt.nodes)  # the agent sees where the best email went
    # The exemplar is the best email so far: its reward never falls.
    for scenario in SCENARIOS:
        rewards = [r["context"][scenario]["exemplar"]["reward"] for r in records[1:]]
        assert rewards == sorted(rewards)
        assert rewards[-1] == max(t["reward"] for r in records[1:] for t in r["trajectories"] if t["scenario_id"] == scenario)
    # The published emails (greedy, one per iteration) carry the fresh context of their own iteration.
    published = [body for body in model.requests if body.get("temperature") == 0 and len(body["messages"]) == 2]
    assert len(published) == ITERATIONS + 1
    assert parse_transcript(published[0]["messages"]).exemplar is None
    for n, body in enumerate(published[1:], start=1):
        assert parse_transcript(body["messages"]).playbook == records[n]["context"][SCENARIOS[0]]["playbook"]

    # Every published email carries its judge score, the baseline's too; best_email is the best-scoring one.
    scores = [r["email"]["score"] for r in records]
    assert all(isinstance(s, float) and 0 <= s <= 1 for s in scores)
    best = max(range(len(records)), key=lambda i: (scores[i], i))
    assert run["best_email"] == records[best]["email"] | {"iteration": best}
    assert run["final_email"] == records[-1]["email"] | {"iteration": len(records) - 1}  # the contract's: the last
