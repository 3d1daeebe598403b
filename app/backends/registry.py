"""How a worker builds what a run names: its backend, its model (ART's), and its judge's endpoint."""

import os
from dataclasses import dataclass

import art

from app.backends.embedded.backend import EmbeddedBackend
from app.backends.specs import base_model, check_available, model_name
from app.kit.settings import Settings


def create_backend(name: str, settings: Settings, embedded: EmbeddedBackend) -> art.Backend | None:
    """The backend for `name`: `embedded` is the worker's own (which also serves its judge); None for `openai`, whose
    model needs no backend."""
    check_available(name, settings)
    if name == "embedded":
        return embedded
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


def create_model(name: str, settings: Settings, run_id: str) -> art.Model:
    """The run's model: trainable for every backend but `openai`, which serves a fixed model."""
    model_name_ = model_name(settings, run_id)
    if name == "openai":
        return art.Model(
            name=model_name_, project=settings.art_project, inference_model_name=base_model(name, settings),
            inference_base_url=settings.openai_base_url or "https://api.openai.com/v1",
            inference_api_key=settings.openai_api_key or "not-needed", report_metrics=[], base_path=settings.art_path,
        )
    return art.TrainableModel(name=model_name_, project=settings.art_project, base_model=base_model(name, settings),
                              report_metrics=[], base_path=settings.art_path)


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
