"""Backend selection, per-backend options, which failures are transient, a fixed model, and the
art.Backend protocol the embedded backend implements."""

import ast
import inspect
from pathlib import Path

import art
import httpx
import openai
import pytest

from app.backends.retry import is_transient
from app.backends.specs import SPECS, BackendUnavailable, EmbeddedOptions, ServerlessOptions, check_available
from app.kit.settings import Settings
from app.loop.schemas import RunConfig
from app.loop.training import train

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


# What each backend can do, as the code outside app/backends reads it: `continuable` lets `init_from` start a run from
# a policy (app/runs/policies.py), `keeps_every_checkpoint` spares a finished run's checkpoints from pruning
# (app/runs/workflow.py) and makes each of its policies deployable (app/policies/service.py).
ABILITIES = {
    "embedded": {"trainable": True, "continuable": True, "keeps_every_checkpoint": True},
    "openai": {"trainable": False, "continuable": True, "keeps_every_checkpoint": True},
    "serverless": {"trainable": True, "continuable": False, "keeps_every_checkpoint": False},
    "local": {"trainable": True, "continuable": False, "keeps_every_checkpoint": False},
    "tinker": {"trainable": True, "continuable": False, "keeps_every_checkpoint": False},
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_each_backend_s_abilities_are_flags_of_its_spec(name):
    spec = SPECS[name]
    assert {flag: getattr(spec, flag) for flag in ABILITIES[name]} == ABILITIES[name]


def _names_a_backend(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and n.value in SPECS for n in ast.walk(node))


def test_no_code_outside_the_backends_tells_a_backend_by_its_name():
    """A comparison with a backend's name (`backend != "embedded"`) or a tuple of names (`CONTINUABLE`) outside
    app/backends is a spec's flag in hiding: a new backend would have to find it."""
    app = Path(__file__).parents[2] / "app"
    found = []
    for path in app.rglob("*.py"):
        if path.is_relative_to(app / "backends"):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            named = (isinstance(node, ast.Compare) and "backend" in ast.unparse(node) and _names_a_backend(node)) or (
                isinstance(node, ast.Tuple | ast.List | ast.Set) and len(node.elts) > 1
                and all(isinstance(e, ast.Constant) and e.value in SPECS for e in node.elts)
                and not path.name == "settings.py")  # BackendName: the settings cannot import the specs
            if named:
                found.append(f"{path.relative_to(app.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "ask the backend's spec for the ability instead:\n" + "\n".join(found)


def test_transient_failures_are_told_apart():
    request = httpx.Request("POST", "http://x")
    assert is_transient(httpx.ConnectError("refused", request=request))
    assert is_transient(openai.InternalServerError("boom", response=httpx.Response(503, request=request), body=None))
    assert is_transient(openai.RateLimitError("slow down", response=httpx.Response(429, request=request), body=None))
    assert is_transient(RuntimeError("Training job failed: node lost"))
    assert not is_transient(openai.BadRequestError("no", response=httpx.Response(400, request=request), body=None))
    assert not is_transient(ValueError("bug"))


async def test_a_fixed_model_is_never_trained():
    model = art.Model(name="fixed", project="p", inference_model_name="m", inference_base_url="http://127.0.0.1:1/v1", inference_api_key="k")
    outcome = await train(None, model, [], TRAIN, step_before=0, retries=0)
    assert outcome.skipped and "fixed model" in outcome.reason


# The eight members NOTES.md lists for art.Backend in openpipe-art 0.5.18.
BACKEND_MEMBERS = {
    "_model_inference_name", "close", "register", "_get_step", "_delete_checkpoint_files",
    "_prepare_backend_for_training", "train", "_train_sft",
}


def test_backend_protocol_is_the_one_we_implement(backend):
    protocol_members = {name for name in vars(art.Backend) if not name.startswith("__") and callable(getattr(art.Backend, name))}
    assert protocol_members == BACKEND_MEMBERS, "art.Backend changed: update EmbeddedBackend and this pin"
    for name in BACKEND_MEMBERS:
        ours, theirs = inspect.signature(getattr(backend, name)), inspect.signature(getattr(art.Backend, name))
        assert list(theirs.parameters)[1:len(ours.parameters) + 1][: len(ours.parameters)] == list(ours.parameters)[: len(theirs.parameters) - 1] or name == "train"
