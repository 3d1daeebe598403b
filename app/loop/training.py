"""Training: one GRPO step through the backend, exactly once per iteration."""

import time

import art

from app.backends.retry import retrying
from app.loop.reward import has_signal
from app.loop.schemas import RunConfig, TrainingOutcome
from app.observability import traced


@traced
async def train(
    backend: art.Backend | None,
    model: art.Model,
    groups: list[art.TrajectoryGroup],
    config: RunConfig,
    *,
    step_before: int,
    retries: int,
) -> TrainingOutcome:
    """One GRPO step through `backend.train` on the groups that carry signal, exactly once.

    A model already past `step_before` was trained by an attempt whose result was lost (a crash,
    or a retry after the job finished): that step counts, and no second one is taken.
    """
    if not model.trainable or backend is None:
        return TrainingOutcome(step=0, skipped=True, reason="this backend serves a fixed model; nothing to train")
    if not config.train_policy:
        return TrainingOutcome(step=step_before, skipped=True, reason="policy training disabled (train_policy=false)")
    useful = [g for g in groups if has_signal(g)]
    if not useful:
        return TrainingOutcome(step=step_before, skipped=True, reason="no group has reward variance")
    kwargs = (config.train_options or {}) | ({} if config.learning_rate is None else {"learning_rate": config.learning_rate})
    started = time.monotonic()
    async for attempt in retrying(retries):
        with attempt:
            current = await model.get_step()
            if current > step_before:
                return TrainingOutcome(step=current, skipped=False, reason="recovered: trained before a restart or retry")
            result = await backend.train(model, useful, **kwargs)
    await model.log(useful, metrics=result.metrics, step=result.step, split="train")
    metrics = {k: float(v) for k, v in result.metrics.items()} | {"duration/train_s": time.monotonic() - started}
    return TrainingOutcome(step=result.step, skipped=False, metrics=metrics)
