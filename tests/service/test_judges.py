"""A real judge misbehaves: scores out of range, malformed JSON, wrong counts. Runs go on."""

import json

import art
import jsonschema
import pytest
from art.rewards.ruler import Response

from app.engine.executor import create_judge
from app.kit.settings import Settings
from app.knowledge_graph.service import demo_document, demo_graph
from app.loop.reward import EXPLANATION_CHARS, RETRY_HINTS, Judge, JudgeError, JudgeStats
from app.main import create_app
from app.runs.schemas import LearnLoopRequest
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
    # Each way it failed is counted per iteration, beside what was judged, retried and dropped.
    total = {key: sum(r["metrics"][key] for r in learned.iterations[1:]) for key in learned.iterations[1]["metrics"]
             if key.startswith("judge/") and key != "judge/latency_s" and key != "judge/cost_usd"}
    assert total["judge/errors/not_json"] > 0 and total["judge/errors/count_mismatch"] > 0 and total["judge/out_of_range"] > 0
    assert total["judge/groups"] == total["judge/judged"] + total["judge/dropped"] == 3 * 4
    assert total["judge/dropped"] == sum(r["metrics"]["dropped_groups"] for r in learned.iterations[1:])
    assert total["judge/halved"] > 0  # a group whose every answer failed was judged in halves
    # Every attempt that failed was retried, except the last of each part that then was halved or dropped.
    failed = total["judge/errors/not_json"] + total["judge/errors/count_mismatch"]
    assert total["judge/retried"] == failed - total["judge/halved"] - total["judge/dropped"]
    assert all(r["metrics"]["judge/latency_s"] > 0 for r in learned.iterations[1:])
    assert {"out_of_range", "malformed", "wrong_count", "good"} <= set(unreliable_judge.calls)


async def test_a_retry_says_what_the_answer_before_got_wrong(unreliable_judge):
    judge = Judge("openai/flaky-judge", {"api_base": unreliable_judge.base_url, "api_key": "k"}, retries=3)
    group = [art.Trajectory(messages_and_choices=[{"role": "user", "content": "Write."}, {"role": "assistant", "content": text}],
                            reward=0.0) for text in ("one", "two")]
    stats = JudgeStats()
    for _ in range(3):  # the judge answers out of range, malformed, wrong count, good, in turn
        assert await judge.judge(art.TrajectoryGroup(group), stats) is not None
    assert unreliable_judge.calls == ["out_of_range", "malformed", "wrong_count", "good", "out_of_range"]
    hinted = [[kind for kind, hint in RETRY_HINTS.items() if hint in prompt] for prompt in unreliable_judge.prompts]
    assert hinted == [[], [], [JudgeError.NOT_JSON], [JudgeError.COUNT_MISMATCH], []]
    assert (stats.groups, stats.judged, stats.retried, stats.dropped, stats.out_of_range) == (3, 3, 2, 0, 4)
    assert stats.errors == {JudgeError.NOT_JSON: 1, JudgeError.COUNT_MISMATCH: 1}


async def test_a_group_too_long_for_the_judge_is_judged_in_parts_that_fit(unreliable_judge):
    judge = Judge("openai/flaky-judge", {"api_base": unreliable_judge.base_url, "api_key": "k"}, retries=3,
                  context_tokens=1024)
    long = "word " * 400  # about 500 tokens each: one fits in 1,024 tokens with the rubric, two do not
    group = [art.Trajectory(messages_and_choices=[{"role": "user", "content": long}, {"role": "assistant", "content": str(n)}],
                            reward=0.0) for n in range(4)]
    stats = JudgeStats()
    judged = await judge.judge(art.TrajectoryGroup(group), stats)
    assert stats.split == 1  # halved until each part fits: one trajectory a request
    assert [prompt.count("<trajectory id=") for prompt in unreliable_judge.prompts] == [1] * len(unreliable_judge.prompts)
    assert [t.messages()[1]["content"] for t in judged.trajectories] == ["0", "1", "2", "3"]
    assert (stats.groups, stats.judged, stats.dropped) == (1, 1, 0)


async def test_a_group_the_judge_keeps_miscounting_is_judged_in_halves_and_an_unreachable_judge_is_not():
    miscounting = UnreliableJudge(behaviours=("wrong_count", "wrong_count", "good", "good"))
    try:
        judge = Judge("openai/flaky-judge", {"api_base": miscounting.base_url, "api_key": "k"}, retries=1)
        group = [art.Trajectory(messages_and_choices=[{"role": "user", "content": "Write."},
                                                      {"role": "assistant", "content": str(n)}], reward=0.0) for n in range(2)]
        stats = JudgeStats()
        judged = await judge.judge(art.TrajectoryGroup(group), stats)
        assert [prompt.count("<trajectory id=") for prompt in miscounting.prompts] == [2, 2, 1, 1]
        assert [t.messages()[1]["content"] for t in judged.trajectories] == ["0", "1"]
        assert (stats.groups, stats.judged, stats.halved, stats.retried, stats.dropped) == (1, 1, 1, 1, 0)
    finally:
        miscounting.close()
    unreachable = Judge("openai/gone", {"api_base": "http://127.0.0.1:9/v1", "api_key": "k"}, retries=1)
    stats = JudgeStats()
    assert await unreachable.judge(art.TrajectoryGroup(group), stats) is None
    assert (stats.halved, stats.dropped, stats.errors[JudgeError.UNAVAILABLE]) == (0, 1, 2)


async def test_a_judge_at_a_base_url_is_asked_for_exactly_one_bounded_score_per_trajectory(unreliable_judge):
    """A small judge served by llama.cpp wrote scores until its token limit under RULER's open-ended list; a
    grammar-decoding server given this format cannot (see the real-model test)."""
    judge = Judge("openai/flaky-judge", {"api_base": unreliable_judge.base_url, "api_key": "k"}, retries=3)
    distinct = [art.Trajectory(messages_and_choices=[{"role": "user", "content": "Write."},
                                                     {"role": "assistant", "content": str(n)}], reward=0.0) for n in range(3)]
    identical = [art.Trajectory(messages_and_choices=[{"role": "user", "content": "Write."},
                                                      {"role": "assistant", "content": "same"}], reward=0.0) for _ in range(2)]
    await judge.judge(art.TrajectoryGroup(distinct))
    await judge.judge(art.TrajectoryGroup(identical))
    asked = [(f["type"], f["json_schema"]["schema"]["properties"]["scores"]) for f in unreliable_judge.formats]
    # The judge answers in turn out of range (used, clamped), then malformed, miscounted and good for the second
    # group: each attempt is asked the same bounds, and RULER shows the judge one of identical trajectories.
    assert [(kind, s["minItems"], s["maxItems"], s["items"]["properties"]["trajectory_id"]["enum"])
            for kind, s in asked] == [("json_schema", 3, 3, ["1", "2", "3"])] + [("json_schema", 1, 1, ["1"])] * 3
    item = asked[0][1]["items"]["properties"]
    assert (item["score"]["minimum"], item["score"]["maximum"], item["explanation"]["maxLength"]) == (0, 1, EXPLANATION_CHARS)
    # An answer within the bounds is one RULER reads.
    answer = {"scores": [{"trajectory_id": i, "explanation": "x" * EXPLANATION_CHARS, "score": 0.5} for i in ("1", "2", "3")]}
    jsonschema.validate(answer, unreliable_judge.formats[0]["json_schema"]["schema"])
    assert len(Response.model_validate(answer).scores) == 3
    # A hosted judge (no base URL) gets RULER's request as RULER builds it.
    assert not Judge("openai/gpt-4.1-mini", {"api_key": "k"}).bounds_answers


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
