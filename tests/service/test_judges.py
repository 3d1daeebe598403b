"""A real judge misbehaves: scores out of range, malformed JSON, wrong counts. Runs go on."""

import json

import pytest

from app.knowledge_graph.service import demo_document, demo_graph
from app.runs.executor import create_judge
from app.main import create_app
from app.runs.schemas import LearnLoopRequest
from app.settings import Settings
from tests.standins import UnreliableJudge
from tests.support import connect, lifespan

JUDGE_KEY = "sk-judge-never-shown"


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


def flaky_judges(judge: UnreliableJudge) -> dict:
    return {"flaky": {"model": "openai/flaky-judge", "base_url": judge.base_url, "api_key": JUDGE_KEY}}


async def test_a_run_names_one_of_the_configured_judges(unreliable_judge, learn):
    learned = await learn(
        LearnLoopRequest(iterations=1, scenario_ids=[demo_document().scenarios[0].id], rollouts_per_group=2, max_turns=2,
                         judge="flaky"),
        judges=flaky_judges(unreliable_judge), judge_retries=3, rollout_concurrency=1,
    )
    assert learned.run["config"]["judge"] == "flaky"
    assert unreliable_judge.calls, "the run's judge, not JUDGE_MODEL's, scored it"
    assert JUDGE_KEY not in json.dumps(learned.run, default=str) + json.dumps(learned.iterations, default=str)


async def test_judges_are_listed_unknown_ones_refused_and_keys_never_shown(unreliable_judge, tmp_path):
    settings = Settings(_env_file=None, database_url=f"sqlite:///{tmp_path}/db.sqlite", environment="test", run_worker=False,
                        judges=flaky_judges(unreliable_judge))
    app = create_app(settings)
    body = {"iterations": 1, "rollouts_per_group": 2, "max_turns": 2}
    async with lifespan(app), connect(app) as client:
        judges = await client.get("/judges")
        assert judges.status_code == 200
        assert judges.json()["data"] == [{"name": "default", "model": "embedded"}, {"name": "embedded", "model": "embedded"},
                                         {"name": "flaky", "model": "openai/flaky-judge"}]
        unknown = await client.post("/learn-loop", json=body | {"judge": "nope"})
        assert unknown.status_code == 422, unknown.text
        detail = unknown.json()["detail"][0]
        assert detail["loc"] == ["body", "judge"] and "flaky" in detail["msg"]
        created = await client.post("/learn-loop", json=body | {"judge": "flaky"})
        assert created.status_code == 202, created.text
        run_id = created.json()["run_id"]
        run = await client.get(f"/runs/{run_id}")
        assert run.json()["config"]["judge"] == "flaky"
        default = await client.post("/learn-loop", json=body)
        assert (await client.get(f"/runs/{default.json()['run_id']}")).json()["config"]["judge"] == "default"
        events = await client.get(f"/runs/{run_id}/events")
        assert events.status_code == 200
        for response in (judges, unknown, created, run, events):
            assert JUDGE_KEY not in response.text and unreliable_judge.base_url not in response.text
