"""`EmbeddedBackend`: satisfies `art.Backend`, so the loop drives it exactly like ART's own backends."""

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

from art import TrainableModel, Trajectory, TrajectoryGroup, dev
from art.types import TrainResult, TrainSFTConfig

from app.backends.embedded.grpo import group_samples, grpo_update
from app.backends.embedded.policy import Checkpoint
from app.backends.embedded.server import JUDGE_MODEL_NAME, LoopbackServer, ModelNotFound, build_app

DEFAULT_LEARNING_RATE = 0.05


class CheckpointStore(Protocol):
    """Where checkpoints outlive the process (the database, in the service)."""

    async def load(self, model_name: str) -> dict[int, bytes]: ...

    async def save(self, model_name: str, step: int, data: bytes, metrics: dict[str, float]) -> None: ...

    async def delete(self, model_name: str, steps: list[int]) -> None: ...


class EmbeddedBackend:
    """A NumPy policy per registered model, one checkpoint per training step, served on loopback."""

    judge_model_name = JUDGE_MODEL_NAME

    def __init__(self, store: CheckpointStore | None = None) -> None:
        self._store = store
        self._checkpoints: dict[str, dict[int, Checkpoint]] = {}
        self._api_key = secrets.token_urlsafe(24)
        self._server: LoopbackServer | None = None

    # -- serving

    @property
    def base_url(self) -> str:
        return self._ensure_server().base_url

    @property
    def api_key(self) -> str:
        return self._api_key

    def _ensure_server(self) -> LoopbackServer:
        if self._server is None:
            server = LoopbackServer(build_app(self._resolve, self._api_key, self._served_names))
            server.start()
            self._server = server
        return self._server

    def forget(self, model: Any) -> None:
        """Drops a finished run's checkpoints from memory (the store keeps them)."""
        self._checkpoints.pop(model.name, None)

    def _served_names(self) -> list[str]:
        return [f"{name}@{step}" for name, steps in self._checkpoints.items() for step in steps]

    def _resolve(self, inference_name: str) -> Checkpoint:
        name, _, step = inference_name.partition("@")
        steps = self._checkpoints.get(name)
        if steps is None:
            raise ModelNotFound(f"model {name!r} is not registered")
        if not step:
            return steps[max(steps)]
        if not step.isdigit() or int(step) not in steps:
            raise ModelNotFound(f"model {name!r} has no checkpoint {step!r}; available: {sorted(steps)}")
        return steps[int(step)]

    # -- art.Backend

    def _model_inference_name(self, model: Any, step: int | None = None) -> str:
        steps = self._checkpoints.get(model.name) or {0: None}
        return f"{model.name}@{max(steps) if step is None else step}"

    async def close(self) -> None:
        if self._server is not None:
            await asyncio.to_thread(self._server.stop)
            self._server = None

    async def register(self, model: Any) -> None:
        if model.name in self._checkpoints:
            return
        saved = await self._store.load(model.name) if self._store else {}
        if saved:
            self._checkpoints[model.name] = {step: Checkpoint.from_bytes(data) for step, data in saved.items()}
            return
        self._checkpoints[model.name] = {0: Checkpoint.initial()}
        if self._store:
            await self._store.save(model.name, 0, self._checkpoints[model.name][0].to_bytes(), {})

    async def _get_step(self, model: Any) -> int:
        return max(self._steps(model))

    async def _delete_checkpoint_files(self, model: Any, steps_to_keep: list[int]) -> None:
        steps = self._steps(model)
        keep = set(steps_to_keep) | {0, max(steps)}  # step 0 is the KL reference
        doomed = [s for s in steps if s not in keep]
        if self._store and doomed:
            await self._store.delete(model.name, doomed)
        for step in doomed:
            del steps[step]

    async def _prepare_backend_for_training(
        self, model: Any, config: dev.OpenAIServerConfig | None
    ) -> tuple[str, str]:
        server = await asyncio.to_thread(self._ensure_server)
        return server.base_url, self._api_key

    async def train(
        self,
        model: TrainableModel,
        trajectory_groups: Iterable[TrajectoryGroup],
        *,
        learning_rate: float = DEFAULT_LEARNING_RATE,
        scale_rewards: bool = True,
        epsilon: float = 0.2,
        epsilon_high: float | None = None,
        kl_penalty_coef: float = 0.0,
        epochs: int = 2,
        **unsupported: Any,
    ) -> TrainResult:
        """One GRPO step on every group with reward variance; checkpoints the result as step + 1."""
        if unsupported:
            raise TypeError(f"the embedded backend does not support {sorted(unsupported)}")
        steps = self._steps(model)
        step = max(steps)
        groups = list(trajectory_groups)
        started = time.monotonic()
        samples, trained, skipped = await asyncio.to_thread(group_samples, groups, scale_rewards)
        checkpoint, metrics = await asyncio.to_thread(
            grpo_update,
            steps[step],
            steps[0].weights,
            samples,
            learning_rate=learning_rate,
            epsilon=epsilon,
            epsilon_high=epsilon if epsilon_high is None else epsilon_high,
            kl_penalty_coef=kl_penalty_coef,
            epochs=epochs,
        )
        metrics |= {
            "groups_trained": float(trained),
            "groups_skipped": float(skipped),
            "trajectories": float(len(samples)),
            "learning_rate": learning_rate,
            "time/step_trainer_s": time.monotonic() - started,
        }
        if self._store:  # durable before it is visible: a crash never serves an unsaved step
            await self._store.save(model.name, step + 1, checkpoint.to_bytes(), metrics)
        steps[step + 1] = checkpoint
        return TrainResult(step=step + 1, metrics=metrics)

    def _train_sft(
        self,
        model: Any,
        trajectories: Iterable[Trajectory],
        config: TrainSFTConfig,
        dev_config: dev.TrainSFTConfig,
        verbose: bool = False,
    ) -> AsyncIterator[dict[str, float]]:
        raise NotImplementedError("the embedded backend trains with GRPO only; SFT needs an LLM backend")

    def _steps(self, model: Any) -> dict[int, Checkpoint]:
        try:
            return self._checkpoints[model.name]
        except KeyError:
            raise ValueError(f"model {model.name!r} is not registered with this backend") from None
