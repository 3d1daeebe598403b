"""Transient-failure retries around the embedded backend's training: each step trains exactly once."""

import art
import httpx
import pytest

from app.backends.embedded import EmbeddedBackend
from app.engine.executor import create_judge
from app.kit.settings import Settings
from app.knowledge_graph.graph import NodeScores
from app.knowledge_graph.service import demo_graph
from app.loop.generation import Policy, generate
from app.loop.reward import Scorer
from app.loop.schemas import RunConfig
from app.loop.training import train

TRAIN = RunConfig(learning_rate=0.05)


def settings(**values) -> Settings:
    return Settings(_env_file=None, **values)


class FlakyTraining:
    """The real embedded backend, with a fault injected into `train`: before it, or after it (a lost answer)."""

    def __init__(self, backend: EmbeddedBackend, faults: list[str]):
        self.backend, self.faults, self.calls = backend, faults, 0

    def __getattr__(self, name):
        return getattr(self.backend, name)

    async def train(self, model, groups, **kwargs):
        self.calls += 1
        fault = self.faults.pop(0) if self.faults else None
        if fault == "before":
            raise httpx.ConnectError("connection refused")
        result = await self.backend.train(model, groups, **kwargs)
        if fault == "after":
            raise httpx.ReadTimeout("the answer was lost")
        if fault == "fatal":
            raise ValueError("a bug, not a hiccup")
        return result


@pytest.fixture
async def scored_groups(backend, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = art.TrainableModel(name="flaky", project="p", base_model="embedded", report_metrics=[])
    await model.register(backend)
    graph = demo_graph()
    config = RunConfig(rollouts_per_group=3, feedback_weight=0)
    scenarios = list(graph.scenarios.values())[:2]
    generation = await generate(
        Policy.of(model), graph, scenarios, {s.id: NodeScores() for s in scenarios}, config,
        iteration=1, concurrency=8, score=Scorer(create_judge(settings(), backend), None, config, iteration=1),
    )
    return model, generation.groups


@pytest.mark.parametrize(("faults", "calls"), [(["before"], 2), (["after"], 1), (["before", "after"], 2)])
async def test_training_is_retried_and_happens_exactly_once(backend, scored_groups, faults, calls):
    model, groups = scored_groups
    flaky = FlakyTraining(backend, faults)
    outcome = await train(flaky, model, groups, TRAIN, step_before=0, retries=3)
    assert outcome.step == 1 and not outcome.skipped and await model.get_step() == 1
    assert flaky.calls == calls
    # The same step run again (a crash before its result was recorded) does not train twice.
    again = await train(flaky, model, groups, TRAIN, step_before=0, retries=3)
    assert again.step == 1 and "recovered" in again.reason and await model.get_step() == 1


async def test_non_transient_failures_are_not_retried(backend, scored_groups):
    model, groups = scored_groups
    flaky = FlakyTraining(backend, ["fatal"])
    with pytest.raises(ValueError, match="bug"):
        await train(flaky, model, groups, TRAIN, step_before=0, retries=3)
    assert flaky.calls == 1


async def test_retries_are_bounded(backend, scored_groups):
    model, groups = scored_groups
    flaky = FlakyTraining(backend, ["before"] * 5)
    with pytest.raises(httpx.ConnectError):
        await train(flaky, model, groups, TRAIN, step_before=0, retries=2)
    assert flaky.calls == 3 and await model.get_step() == 0


async def test_groups_staler_than_the_bound_are_not_trained_on(backend, scored_groups):
    """A group sampled at step k trains in the step after `step_before`: it is step_before − k steps off policy."""
    model, groups = scored_groups
    flaky = FlakyTraining(backend, [])

    def sampled_at(*steps: int) -> list[art.TrajectoryGroup]:
        for group, step in zip(groups, steps, strict=True):
            for trajectory in group.trajectories:
                trajectory.initial_policy_version = step
        return groups

    def bound(steps: int) -> RunConfig:
        return TRAIN.model_copy(update={"max_steps_off_policy": steps})

    fresh = await train(flaky, model, sampled_at(0, 0), bound(0), step_before=0, retries=0)
    assert (fresh.step, flaky.calls, fresh.metrics["steps_off_policy"], fresh.metrics["discarded_stale_groups"]) == (1, 1, 0, 0)
    mixed = await train(flaky, model, sampled_at(0, 1), bound(0), step_before=1, retries=0)
    assert (mixed.step, flaky.calls, mixed.metrics["steps_off_policy"], mixed.metrics["discarded_stale_groups"]) == (2, 2, 1, 1)
    stale = await train(flaky, model, sampled_at(0, 0), bound(1), step_before=2, retries=0)
    assert stale.skipped and stale.reason == "every group was staler than max_steps_off_policy" and stale.step == 2
    assert flaky.calls == 2 and stale.metrics == {"steps_off_policy": 2.0, "discarded_stale_groups": 2.0}
