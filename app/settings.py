"""One pydantic-settings object for every knob; read from the environment and `.env`."""

from functools import lru_cache
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

BackendName = Literal["embedded", "openai", "serverless", "local", "tinker"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    environment: Literal["development", "production", "test"] = "development"
    model_backend: BackendName = "embedded"
    judge_model: str = "embedded"
    judge_base_url: str | None = None
    judge_api_key: str | None = None
    art_project: str = "codreamer"
    art_model_name: str = "model"
    art_base_model: str = "Qwen/Qwen2.5-14B-Instruct"
    wandb_api_key: str | None = None
    weave_project: str | None = None
    rollout_concurrency: int = Field(32, ge=1, description="Rollouts in flight at once per run.")
    judge_retries: int = Field(2, ge=0, description="Extra judge attempts per group before it is dropped.")


@lru_cache
def get_settings() -> Settings:
    return Settings()
