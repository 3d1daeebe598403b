"""Backend selection, per-backend options, transient-failure retries and exactly-once training."""

import art
import httpx
import openai
import pytest

from app.backends.embedded import EmbeddedBackend
from app.backends.registry import SPECS, BackendUnavailable, EmbeddedOptions, ServerlessOptions, check_available
from app.backends.retry import is_transient
from app.knowledge_graph.graph import NodeScores
from app.knowledge_graph.service import demo_graph
from app.loop.generation import Policy, generate
from app.loop.reward import Scorer
from app.loop.training import train
from app.runs.executor import create_judge
from app.loop.schemas import RunConfig
from app.settings import Settings


TRAIN = RunConfig(learning_rate=0.05)


def settings(**values) -> Settings:
    return Settings(_env_file=None, **values)


@pytest.mark.parametrize(("name", "values", "message"), [
    ("openai", {}, "OPENAI_MODEL"),
    ("openai", {"openai_model": "gpt-4.1-mini"}, "OPENAI_API_KEY"),
    ("serverless", {}, "WANDB_API_KEY"),
    ("local", {}, "pip install 'codreamer[local]'"),
    ("tinker", {}, "pip install 'codreamer[tinker]'"),
])
def test_unusable_backends_say_what_to_install_or_set(name, values, message):
    with pytest.raises(BackendUnavailable, match=message.replace("[", r"\[").replace("]", r"\]")):
        check_available(name, settings(**values))


def test_usable_backends_pass():
    check_available("embedded", settings())
    check_available("openai", settings(openai_model="m", openai_base_url="http://127.0.0.1:1/v1"))
    check_available("serverless", settings(wandb_api_key="k"))


def test_each_backend_accepts_only_its_own_options():
    assert EmbeddedOptions.model_validate({"kl_penalty_coef": 0.1}).epochs == 2
    with pytest.raises(ValueError, match="ppo"):
        EmbeddedOptions.model_validate({"ppo": True})
    assert ServerlessOptions.model_validate({"ppo": True}).ppo
    with pytest.raises(ValueError, match="epochs"):
        ServerlessOptions.model_validate({"epochs": 3})
    with pytest.raises(ValueError):
        SPECS["openai"].options.model_validate({"scale_rewards": True})
    assert not SPECS["openai"].trainable and SPECS["openai"].default_learning_rate is None


def test_transient_failures_are_told_apart():
    request = httpx.Request("POST", "http://x")
    assert is_transient(httpx.ConnectError("refused", request=request))
    assert is_transient(openai.InternalServerError("boom", response=httpx.Response(503, request=request), body=None))
    assert is_transient(openai.RateLimitError("slow down", response=httpx.Response(429, request=request), body=None))
    assert is_transient(RuntimeError("Training job failed: node lost"))
    assert not is_transient(openai.BadRequestError("no", response=httpx.Response(400, request=request), body=None))
    assert not is_transient(ValueError("bug"))


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


async def test_a_fixed_model_is_never_trained():
    model = art.Model(name="fixed", project="p", inference_model_name="m", inference_base_url="http://127.0.0.1:1/v1", inference_api_key="k")
    outcome = await train(None, model, [], TRAIN, step_before=0, retries=0)
    assert outcome.skipped and "fixed model" in outcome.reason
