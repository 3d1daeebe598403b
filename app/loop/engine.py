"""The learning loop in the foreground: baseline email, then N iterations of the four steps."""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

import art

from app.knowledge_graph.graph import KnowledgeGraph
from app.loop import steps
from app.loop.feedback import FeedbackSimulator
from app.loop.schemas import Email, LoopConfig, RewardStats, TrainingOutcome


class LoopConfigError(ValueError):
    """The config names something the graph does not have."""


@dataclass
class IterationResult:
    iteration: int
    email: Email | None
    rewards: RewardStats | None
    training: TrainingOutcome | None
    node_scores_changed: dict[str, float]
    node_scores: dict[str, float]
    metrics: dict[str, float]
    started_at: datetime
    finished_at: datetime
    groups: list[art.TrajectoryGroup] = field(default_factory=list)


def resolve_scenarios(config: LoopConfig, graph: KnowledgeGraph) -> tuple[list, object]:
    """(training scenarios, target scenario) with the contract's defaults."""
    ids = config.scenario_ids or list(graph.scenarios)
    unknown = [i for i in ids if i not in graph.scenarios]
    if unknown:
        raise LoopConfigError(f"unknown scenario ids for graph {graph.id!r}: {unknown}")
    target = config.target_scenario_id or ids[0]
    if target not in graph.scenarios:
        raise LoopConfigError(f"unknown target_scenario_id {target!r} for graph {graph.id!r}")
    return [graph.scenarios[i] for i in ids], graph.scenarios[target]


async def run_learning_loop(
    config: LoopConfig,
    *,
    backend: art.Backend | None,
    model: art.Model,
    graph: KnowledgeGraph,
    judge: steps.Judge,
    feedback: FeedbackSimulator | None,
    concurrency: int = 32,
    train_options: dict | None = None,
    retries: int = 3,
    train_policy: bool = True,
    reweight_graph: bool = True,
    on_iteration: Callable[[IterationResult], None] = lambda _: None,
) -> list[IterationResult]:
    """`train_policy` and `reweight_graph` exist for ablations: switch one off to measure the other."""
    scenarios, target = resolve_scenarios(config, graph)
    if backend is not None:
        await model.register(backend)
    policy = steps.Policy.of(model)
    async with policy.client:  # closed with the loop that used it
        scores = dict(graph.initial_scores)
        results = []

        started = datetime.now(UTC)
        email, _ = await steps.write_email(policy, graph, target, scores, config.max_turns)
        baseline = IterationResult(0, email, None, None, {}, scores, {}, started, datetime.now(UTC))
        on_iteration(baseline)
        results.append(baseline)

        score = partial(
            steps.score_group, judge=judge, feedback=feedback, feedback_weight=config.feedback_weight, seed=config.seed
        )
        for iteration in range(1, config.iterations + 1):
            started = datetime.now(UTC)
            generation = await steps.generate(
                policy, graph, scenarios, scores,
                rollouts_per_group=config.rollouts_per_group, max_turns=config.max_turns, seed=config.seed,
                iteration=iteration, concurrency=concurrency, score=partial(score, iteration=iteration),
            )
            groups = generation.groups
            if train_policy:
                training = await steps.train(
                    backend, model, groups, learning_rate=config.learning_rate, options=train_options or {},
                    step_before=await model.get_step(), retries=retries,
                )
            else:
                training = TrainingOutcome(step=await model.get_step(), skipped=True, reason="policy training disabled")
            clock = time.monotonic()
            changed = {}
            if reweight_graph:
                scores, changed = steps.reweight(scores, groups, config.top_fraction)
            reweight_s = time.monotonic() - clock
            clock = time.monotonic()
            email, _ = await steps.write_email(policy, graph, target, scores, config.max_turns)
            email = email or steps.best_email(groups, target.id)
            metrics = generation.metrics | {"duration/reweight_s": reweight_s, "duration/email_s": time.monotonic() - clock}
            result = IterationResult(
                iteration, email, steps.reward_stats(groups), training, changed, scores, metrics,
                started, datetime.now(UTC), groups,
            )
            on_iteration(result)
            results.append(result)
        if any(r.training and not r.training.skipped for r in results):  # keep the latest and best steps
            await model.delete_checkpoints(best_checkpoint_metric="train/reward")
        return results
