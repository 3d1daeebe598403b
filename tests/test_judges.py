"""A real judge misbehaves: scores out of range, malformed JSON, wrong counts. Runs go on."""

import pytest

from app.backends.embedded import EmbeddedBackend
from app.knowledge_graph.service import demo_graph
from app.loop.runtime import create_judge
from app.runs.schemas import LearnLoopRequest
from app.settings import Settings
from tests.standins import UnreliableJudge


@pytest.fixture
def unreliable_judge():
    judge = UnreliableJudge()
    yield judge
    judge.close()


async def test_the_judge_setting_points_ruler_at_the_endpoint(unreliable_judge, backend):
    settings = Settings(_env_file=None, judge_model="openai/flaky-judge", judge_base_url=unreliable_judge.base_url,
                        judge_api_key="k", judge_retries=1)
    judge = create_judge(settings, backend)
    assert judge.model == "openai/flaky-judge" and judge.params == {"api_base": unreliable_judge.base_url, "api_key": "k"}
    assert judge.retries == 1


async def test_runs_survive_an_unreliable_judge(unreliable_judge, learn):
    scenarios = [s.id for s in demo_graph().document.scenarios[:4]]
    learned = await learn(
        LearnLoopRequest(iterations=3, scenario_ids=scenarios, rollouts_per_group=3, seed=2, feedback_weight=0.0),
        judge_model="openai/flaky-judge", judge_base_url=unreliable_judge.base_url, judge_api_key="k",
        judge_retries=1, rollout_concurrency=1,
    )
    assert learned.run["status"] == "succeeded"
    assert [r["iteration"] for r in learned.iterations] == [0, 1, 2, 3]
    rewards = [t["reward"] for r in learned.iterations[1:] for t in r["trajectories"]]
    assert rewards and all(0.0 <= reward <= 1.0 for reward in rewards)
    assert {0.0, 1.0} & set(rewards), "the out-of-range scores were clamped, not dropped"
    assert sum(r["metrics"]["dropped_groups"] for r in learned.iterations[1:]) > 0
    assert all(r["metrics"]["judge/latency_s"] > 0 for r in learned.iterations[1:])
    assert {"out_of_range", "malformed", "wrong_count", "good"} <= set(unreliable_judge.calls)
