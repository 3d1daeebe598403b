"""The model backends a run can name: what each trains with, what it needs, and what it leaves behind.

Each backend declares the training options it accepts (ART's backends differ), checked at request time, and what
must be installed or set, checked before a run or the service starts. Nothing here imports ART: the API checks
requests with it, and only a worker builds backends (`app.backends.registry`).
"""

import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncSession

from app.backends.embedded.policy import DEFAULT_LEARNING_RATE
from app.backends.embedded.repository import copy_checkpoint, delete_model_checkpoints
from app.kit.settings import Settings

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


@dataclass(frozen=True, kw_only=True)
class BackendSpec:
    """A backend's name and what it can do: code outside `app.backends` reads these flags, never the name."""

    name: str
    trainable: bool
    # A run can start from one of its policies (`init_from`): its checkpoint is copied, or it has none to copy.
    continuable: bool
    # Every checkpoint of a finished run stays, so each of its policies can be deployed. Otherwise the run's end prunes
    # all but the latest and best (ART's `delete_checkpoints`), and only its latest policy is deployable.
    keeps_every_checkpoint: bool
    options: type[Options]
    default_learning_rate: float | None
    summary: str
    # its checkpoints live in our database (copied with a kept policy); otherwise at the provider, under the run's name
    stores_checkpoints: bool = False


SPECS = {
    spec.name: spec
    for spec in (
        # the embedded backend's checkpoints are a few kilobytes each, in our database: they all stay
        BackendSpec(name="embedded", trainable=True, continuable=True, keeps_every_checkpoint=True,
                    options=EmbeddedOptions, default_learning_rate=DEFAULT_LEARNING_RATE, stores_checkpoints=True,
                    summary="CPU policy on loopback (the default)"),
        # a hosted model: no checkpoint to copy or to prune
        BackendSpec(name="openai", trainable=False, continuable=True, keeps_every_checkpoint=True, options=Options,
                    default_learning_rate=None, summary="any OpenAI-compatible model, not trained"),
        # ART forks a checkpoint only through experimental members this service does not call
        BackendSpec(name="serverless", trainable=True, continuable=False, keeps_every_checkpoint=False,
                    options=ServerlessOptions, default_learning_rate=5e-6, summary="ART Serverless (W&B Training)"),
        BackendSpec(name="local", trainable=True, continuable=False, keeps_every_checkpoint=False, options=LocalOptions,
                    default_learning_rate=5e-6, summary="ART LocalBackend on a CUDA GPU"),
        BackendSpec(name="tinker", trainable=True, continuable=False, keeps_every_checkpoint=False, options=TinkerOptions,
                    default_learning_rate=1e-5, summary="ART TinkerBackend"),
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


def model_name(settings: Settings, run_id: str) -> str:
    """A run's model name, the key of its checkpoints and of ART's folder for it."""
    return f"{settings.art_model_name}-{run_id}"


def base_model(name: str, settings: Settings) -> str:
    """The model a backend's policies start from (or serve, for `openai`)."""
    if name == "embedded":
        return "embedded"
    return settings.openai_model if name == "openai" else settings.art_base_model


def delete_local_files(settings: Settings, model_name: str) -> None:
    """What ART wrote for a model on this machine (its history and trajectory logs, with full conversations)."""
    shutil.rmtree(Path(settings.art_path) / settings.art_project / "models" / model_name, ignore_errors=True)


async def delete_stored_checkpoints(session: AsyncSession, model_name: str) -> None:
    """The checkpoints a backend keeps in our database (the embedded one's), in the caller's transaction."""
    await delete_model_checkpoints(session, model_name)


async def copy_stored_checkpoint(session: AsyncSession, source: str, step: int, target: str, target_step: int) -> bool:
    """A checkpoint kept in our database, as another model's step, in the caller's transaction; False when the
    source step is not stored."""
    return await copy_checkpoint(session, source, step, target, target_step)
