"""The model backends a run can use: what each trains with, what it needs, and how it is built.

Each backend declares the training options it accepts (ART's backends differ), checked at
request time, and what must be installed or set, checked before a run or the service starts.
"""

import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import art
from pydantic import BaseModel, ConfigDict, Field

from sqlalchemy.ext.asyncio import AsyncSession

from app.backends.embedded.backend import DEFAULT_LEARNING_RATE, CheckpointStore, EmbeddedBackend
from app.backends.embedded.repository import delete_model_checkpoints
from app.settings import Settings

ImportanceSampling = Literal["token", "sequence", "average", "geometric_average"]


class BackendUnavailable(RuntimeError):
    """A selected backend that cannot run here; the message says what to install or set."""


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EmbeddedOptions(Options):
    scale_rewards: bool = True
    epsilon: float = Field(0.2, gt=0, le=1)
    epsilon_high: float | None = Field(None, gt=0, le=10)
    kl_penalty_coef: float = Field(0.0, ge=0, le=100)
    epochs: int = Field(2, ge=1, le=16)


class ServerlessOptions(Options):
    """The keyword arguments of `art.ServerlessBackend.train` (openpipe-art 0.5)."""

    ppo: bool = False
    epsilon: float | None = Field(None, gt=0, le=1)
    epsilon_high: float | None = Field(None, gt=0, le=10)
    advantage_balance: float = Field(0.0, ge=-1, le=1)
    scale_rewards: bool = True
    importance_sampling_level: ImportanceSampling = "token"
    max_negative_advantage_importance_sampling_weight: float | None = Field(None, gt=0)
    mask_prob_ratio: bool = False
    precalculate_logprobs: bool = False


class LocalOptions(ServerlessOptions):
    """`art.local.LocalBackend.train` adds its loss function and a KL penalty."""

    loss_fn: Literal["cispo", "ppo"] = "cispo"
    normalize_advantages: bool = True
    kl_penalty_coef: float = Field(0.0, ge=0, le=100)


class TinkerOptions(Options):
    loss_fn: Literal["cispo", "ppo", "importance_sampling", "dro"] = "cispo"
    normalize_advantages: bool = True


@dataclass(frozen=True)
class BackendSpec:
    name: str
    trainable: bool
    options: type[Options]
    default_learning_rate: float | None
    summary: str


SPECS = {
    spec.name: spec
    for spec in (
        BackendSpec("embedded", True, EmbeddedOptions, DEFAULT_LEARNING_RATE, "CPU policy on loopback (the default)"),
        BackendSpec("openai", False, Options, None, "any OpenAI-compatible model, not trained"),
        BackendSpec("serverless", True, ServerlessOptions, 5e-6, "ART Serverless (W&B Training)"),
        BackendSpec("local", True, LocalOptions, 5e-6, "ART LocalBackend on a CUDA GPU"),
        BackendSpec("tinker", True, TinkerOptions, 1e-5, "ART TinkerBackend"),
    )
}


def _missing_module(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def check_available(name: str, settings: Settings) -> None:
    """Raises BackendUnavailable with exactly what to install or set."""
    if name == "openai":
        if not settings.openai_model:
            raise BackendUnavailable("backend 'openai' needs OPENAI_MODEL (and OPENAI_BASE_URL for a non-OpenAI server)")
        if not (settings.openai_api_key or settings.openai_base_url):
            raise BackendUnavailable("backend 'openai' needs OPENAI_API_KEY, or OPENAI_BASE_URL for a server without keys")
    elif name == "serverless":
        if _missing_module("wandb"):
            raise BackendUnavailable("backend 'serverless' needs its extra: pip install 'codreamer[serverless]'")
        if not settings.wandb_api_key:
            raise BackendUnavailable("backend 'serverless' needs WANDB_API_KEY (a W&B key with Training access)")
    elif name == "local":
        if _missing_module("torch") or _missing_module("unsloth") or _missing_module("vllm"):
            raise BackendUnavailable("backend 'local' needs its extra on a CUDA machine: pip install 'codreamer[local]'")
        import torch

        if not torch.cuda.is_available():
            raise BackendUnavailable("backend 'local' needs a CUDA GPU; torch sees none on this machine")
    elif name == "tinker":
        if _missing_module("tinker") or _missing_module("tinker_cookbook"):
            raise BackendUnavailable("backend 'tinker' needs its extra: pip install 'codreamer[tinker]'")
        if not settings.tinker_api_key:
            raise BackendUnavailable("backend 'tinker' needs TINKER_API_KEY")


def create_backend(name: str, settings: Settings, store: CheckpointStore | None = None) -> art.Backend | None:
    """The backend for `name`; None for `openai`, whose model needs no backend."""
    check_available(name, settings)
    if name == "embedded":
        return EmbeddedBackend(store)
    if name == "openai":
        return None
    if name == "serverless":
        return art.ServerlessBackend(api_key=settings.wandb_api_key, base_url=settings.art_serverless_base_url)
    if name == "local":
        from art.local import LocalBackend

        return LocalBackend()
    if name == "tinker":
        from art.tinker import TinkerBackend

        os.environ["TINKER_API_KEY"] = settings.tinker_api_key  # passing it in would print it
        return TinkerBackend()
    raise ValueError(f"unknown backend {name!r}")


def model_name(settings: Settings, run_id: str) -> str:
    """A run's model name, the key of its checkpoints and of ART's folder for it."""
    return f"{settings.art_model_name}-{run_id}"


def create_model(name: str, settings: Settings, run_id: str) -> art.Model:
    """The run's model: trainable for every backend but `openai`, which serves a fixed model."""
    model_name_ = model_name(settings, run_id)
    if name == "openai":
        return art.Model(
            name=model_name_, project=settings.art_project, inference_model_name=settings.openai_model,
            inference_base_url=settings.openai_base_url or "https://api.openai.com/v1",
            inference_api_key=settings.openai_api_key or "not-needed", report_metrics=[], base_path=settings.art_path,
        )
    base_model = "embedded" if name == "embedded" else settings.art_base_model
    return art.TrainableModel(
        name=model_name_, project=settings.art_project, base_model=base_model, report_metrics=[], base_path=settings.art_path
    )


def delete_local_files(settings: Settings, model_name: str) -> None:
    """What ART wrote for a model on this machine (its history and trajectory logs, with full conversations)."""
    shutil.rmtree(Path(settings.art_path) / settings.art_project / "models" / model_name, ignore_errors=True)


async def delete_stored_checkpoints(session: AsyncSession, model_name: str) -> None:
    """The checkpoints a backend keeps in our database (the embedded one's), in the caller's transaction."""
    await delete_model_checkpoints(session, model_name)


@dataclass(frozen=True)
class JudgeEndpoint:
    """Where a RULER judge is reached: a litellm model string and its connection parameters."""

    model: str
    params: dict
    context_tokens: int | None = None


def judge_endpoint(settings: Settings, embedded: EmbeddedBackend, name: str = "default") -> JudgeEndpoint:
    """The judge a run names: `default` is JUDGE_MODEL's, `embedded` the embedded server's, any other one of JUDGES.

    A model of `embedded` uses the embedded server's judge; anything else is a litellm model string.
    """
    if name == "default":
        model, base_url, api_key = settings.judge_model, settings.judge_base_url, settings.judge_api_key
        context, max_tokens = settings.judge_context_tokens, settings.judge_max_tokens
    elif name == "embedded":
        model, base_url, api_key, context, max_tokens = "embedded", None, None, None, None
    else:
        spec = settings.judges[name]
        model, base_url, api_key, context, max_tokens = spec.model, spec.base_url, spec.api_key, spec.context_tokens, spec.max_tokens
    if model == "embedded":
        return JudgeEndpoint(f"openai/{embedded.judge_model_name}", {"api_base": embedded.base_url, "api_key": embedded.api_key})
    params = {"api_base": base_url, "api_key": api_key, "max_tokens": max_tokens}
    return JudgeEndpoint(model, {k: v for k, v in params.items() if v}, context)
