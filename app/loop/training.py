"""Training: one GRPO step through the backend, exactly once per iteration."""

import time

import art

from app.backends.retry import retrying
from app.kit.observability import traced
from app.loop.reward import has_signal
from app.loop.schemas import RunConfig, TrainingOutcome


def steps_off_policy(group: art.TrajectoryGroup, step_before: int) -> int:
    """How many steps the policy being trained is ahead of the one that sampled the group (its oldest rollout)."""
    sampled = [t.initial_policy_version for t in group.trajectories if t.initial_policy_version is not None]
    return step_before - min(sampled) if sampled else 0


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
    """One GRPO step through `backend.train` on the groups that carry signal, exactly once. Groups sampled more
    than `max_steps_off_policy` steps behind the policy being trained are dropped, not trained on.

    A model already past `step_before` was trained by an attempt whose result was lost (a crash,
    or a retry after the job finished): that step counts, and no second one is taken.
    """
    if not model.trainable or backend is None:
        return TrainingOutcome(step=0, skipped=True, reason="this backend serves a fixed model; nothing to train")
    if not config.train_policy:
        return TrainingOutcome(step=step_before, skipped=True, reason="policy training disabled (train_policy=false)")
    fresh = [g for g in groups if steps_off_policy(g, step_before) <= (config.max_steps_off_policy or 0)]
    useful = [g for g in fresh if has_signal(g)]
    pipeline = {"steps_off_policy": float(max((steps_off_policy(g, step_before) for g in groups), default=0)),
                "discarded_stale_groups": float(len(groups) - len(fresh))}
    if not useful:
        reason = "every group was staler than max_steps_off_policy" if groups and not fresh else "no group has reward variance"
        return TrainingOutcome(step=step_before, skipped=True, reason=reason, metrics=pipeline)
    kwargs = (config.train_options or {}) | ({} if config.learning_rate is None else {"learning_rate": config.learning_rate})
    started = time.monotonic()
    async for attempt in retrying(retries):
        with attempt:
            current = await model.get_step()
            if current > step_before:
                return TrainingOutcome(step=current, skipped=False, reason="recovered: trained before a restart or retry",
                                       metrics=pipeline)
            result = await backend.train(model, useful, **kwargs)
    await model.log(useful, metrics=result.metrics, step=result.step, split="train")
    metrics = {k: float(v) for k, v in result.metrics.items()} | pipeline | {"duration/train_s": time.monotonic() - started}
    return TrainingOutcome(step=result.step, skipped=False, metrics=metrics)
