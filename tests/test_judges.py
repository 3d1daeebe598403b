"""A real judge misbehaves: scores out of range, malformed JSON, wrong counts. Runs go on."""

import pytest

from app.backends.embedded import EmbeddedBackend
from app.backends.registry import create_model
from app.knowledge_graph.service import demo_graph
from app.loop.engine import run_learning_loop
from app.loop.runtime import create_feedback, create_judge
from app.loop.schemas import LoopConfig
from app.settings import Settings
from tests.standins import UnreliableJudge


@pytest.fixture
def unreliable_judge():
    judge = UnreliableJudge()
    yield judge
    judge.close()


async def test_runs_survive_an_unreliable_judge(unreliable_judge, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = Settings(_env_file=None, judge_model="openai/flaky-judge", judge_base_url=unreliable_judge.base_url,
                        judge_api_key="k", judge_retries=1)
    backend = EmbeddedBackend()
    try:
        judge = create_judge(settings, backend)
        assert judge.model == "openai/flaky-judge" and judge.params["api_base"] == unreliable_judge.base_url
        scenarios = [s.id for s in demo_graph().document.scenarios[:4]]
        results = await run_learning_loop(
            LoopConfig(iterations=3, scenario_ids=scenarios, rollouts_per_group=3, seed=2, feedback_weight=0.0),
            backend=backend, model=create_model("embedded", settings, "judged"), graph=demo_graph(), judge=judge,
            feedback=create_feedback(demo_graph()), concurrency=1,
        )
    finally:
        await backend.close()
    assert [r.iteration for r in results] == [0, 1, 2, 3]
    trained = [r for r in results[1:] if r.groups]
    assert trained, "every group of every iteration was dropped"
    rewards = [t.reward for r in trained for g in r.groups for t in g.trajectories]
    assert all(0.0 <= reward <= 1.0 for reward in rewards)
    assert {0.0, 1.0} & set(rewards), "the out-of-range scores were clamped, not dropped"
    assert sum(r.metrics["dropped_groups"] for r in results[1:]) > 0
    assert all(r.metrics["judge/latency_s"] > 0 for r in trained)
    assert {"out_of_range", "malformed", "wrong_count", "good"} <= set(unreliable_judge.calls)
