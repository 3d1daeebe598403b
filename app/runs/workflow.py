"""The durable learning loop: a DBOS workflow per run that composes the loop's steps.

Each step is a DBOS step, so a crash resumes at the last completed one. Steps are idempotent:
generate replaces its trajectories, train checks the model's step before training again, and
publish records an iteration only if it is not there yet, all in one transaction with its event.
"""

import time
from contextlib import contextmanager
from datetime import datetime
from functools import partial

from dbos import DBOS, SetWorkflowID
from sqlalchemy import select

from app.core import services
from app.db import utcnow
from app.faults import crash_point
from app.knowledge_graph.graph import NodeScores
from app.loop import steps
from app.loop.runtime import create_feedback
from app.loop.schemas import LoopConfig
from app.observability import call_with_trace
from app.runs import service
from app.runs.models import Iteration, Run

RUNS_QUEUE = "runs"


class StepFailed(Exception):
    """A step's failure, named for the run's `error.step`."""

    def __init__(self, step: str, message: str):
        super().__init__(step, message)
        self.step, self.message = step, message


@contextmanager
def failures_as(step: str):
    try:
        yield
    except StepFailed:
        raise
    except Exception as exc:
        raise StepFailed(step, f"{type(exc).__name__}: {exc}") from exc


async def _run(run_id: str) -> tuple[Run, LoopConfig]:
    async with services().db.read() as session:
        run = await session.get(Run, run_id)
    fields = LoopConfig.model_fields
    return run, LoopConfig(**{k: v for k, v in run.config.items() if k in fields})


async def _policy(run: Run):
    return await services().executor.policy(run.id, run.config["backend"])


async def _context(run_id: str):
    run, config = await _run(run_id)
    graph = await services().graphs.get(run.graph_id)
    async with services().db.read() as session:
        scores = NodeScores(await service.current_scores(session, run_id))  # no copy of the whole graph
    return run, config, graph, scores


def _wake_relay() -> None:
    if services().relay is not None:
        services().relay.wake()


@DBOS.step(name="start")
async def start_step(run_id: str) -> dict:
    """Marks the run running; a resumed run continues after its last recorded iteration."""
    async with services().db.transaction() as session:
        run = await service.begin(session, run_id)
        status, total = run.status, run.iterations_total
        latest = await service.latest_iteration(session, run_id)
    _wake_relay()
    return {"status": status, "iterations_total": total, "next_iteration": 0 if latest is None else latest + 1}


@DBOS.step(name="generate")
async def generate_step(run_id: str, iteration: int) -> dict:
    """Rollouts for every scenario, each group judged as soon as it is complete; stored with rewards."""
    started_at = utcnow().isoformat()
    with failures_as("generate"):
        run, config, graph, scores = await _context(run_id)
        executor = services().executor
        policy = await _policy(run)
        judge = partial(
            steps.score_group, judge=executor.judge, feedback=create_feedback(graph),
            feedback_weight=config.feedback_weight, seed=config.seed, iteration=iteration,
        )

        async def score(group):
            scored = await judge(group)
            crash_point("score", iteration)
            return scored

        generation, trace_url = await call_with_trace(
            steps.generate, policy, graph, [graph.scenarios[s] for s in config.scenario_ids], scores,
            rollouts_per_group=config.rollouts_per_group, max_turns=config.max_turns, seed=config.seed,
            iteration=iteration, concurrency=services().settings.rollout_concurrency, score=score,
        )
    if not generation.groups:
        raise StepFailed("score", f"every group was dropped ({generation.metrics['dropped_groups']:.0f} by the judge, "
                                  f"{generation.metrics['rollout_exceptions']:.0f} rollout errors)")
    with failures_as("generate"):
        async with services().db.transaction() as session:
            await service.replace_trajectories(session, run_id, iteration, generation.groups)
    crash_point("generate", iteration)
    return {"started_at": started_at, "metrics": generation.metrics, "trace_url": trace_url,
            "rewards": steps.reward_stats(generation.groups).model_dump()}


@DBOS.step(name="train")
async def train_step(run_id: str, iteration: int) -> dict:
    with failures_as("train"):
        run, config = await _run(run_id)
        policy = await _policy(run)
        async with services().db.read() as session:
            previous = await session.scalar(select(Iteration.training).where(Iteration.run_id == run_id, Iteration.iteration == iteration - 1))
            groups = await service.load_groups(session, run_id, iteration)
        outcome = await steps.train(
            services().executor.backend(run.config["backend"]), policy.model, groups,
            learning_rate=config.learning_rate, options=run.config.get("train_options") or {},
            step_before=(previous or {}).get("step", 0), retries=services().settings.backend_retries,
        )
    crash_point("train", iteration)
    return outcome.model_dump()


@DBOS.step(name="reweight")
async def reweight_step(run_id: str, iteration: int) -> dict:
    with failures_as("reweight"):
        started = time.monotonic()
        run, config, _, scores = await _context(run_id)
        async with services().db.read() as session:
            groups = await service.load_groups(session, run_id, iteration)
        _, changed = steps.reweight(scores, groups, config.top_fraction)
    crash_point("reweight", iteration)
    return {"changed": changed, "seconds": time.monotonic() - started}


@DBOS.step(name="email")
async def email_step(run_id: str, iteration: int, changed: dict[str, float]) -> dict:
    """The published email: the updated policy's greedy rollout for the target scenario."""
    with failures_as("email"):
        started = utcnow()
        run, config, graph, scores = await _context(run_id)
        policy = await _policy(run)
        target = graph.scenarios[config.target_scenario_id]
        email, _ = await steps.write_email(policy, graph, target, NodeScores(scores | changed), config.max_turns)
        if email is None and iteration > 0:
            async with services().db.read() as session:
                email = steps.best_email(await service.load_groups(session, run_id, iteration), target.id)
        if email is None:
            raise StepFailed("email", f"the policy wrote no email for {target.id} within {config.max_turns} turns")
    crash_point("email", iteration)
    return {"email": email.model_dump(), "started_at": started.isoformat(), "seconds": (utcnow() - started).total_seconds()}


@DBOS.step(name="publish")
async def publish_step(run_id: str, iteration: int, record: dict) -> str:
    """Records the iteration (once) and returns the run's status."""
    run, _ = await _run(run_id)
    graph = await services().graphs.get(run.graph_id)
    async with services().db.transaction() as session:
        await service.record_iteration(session, graph, run_id, iteration, **record)
        status = (await session.get(Run, run_id)).status
    _wake_relay()
    crash_point("publish", iteration)
    return status


@DBOS.step(name="finish")
async def finish_step(run_id: str) -> None:
    async with services().db.transaction() as session:
        await service.finish(session, run_id)
    _wake_relay()
    run, _ = await _run(run_id)
    policy = await _policy(run)
    if policy.model.trainable:
        await policy.model.delete_checkpoints(best_checkpoint_metric="train/reward")
    await services().executor.forget(run_id)


@DBOS.step(name="fail")
async def fail_step(run_id: str, step: str, message: str) -> None:
    async with services().db.transaction() as session:
        await service.fail(session, run_id, step, message)
    _wake_relay()
    await services().executor.forget(run_id)


@DBOS.workflow(name="learning_run")
async def learning_run(run_id: str) -> str:
    state = await start_step(run_id)
    if state["status"] != "running":
        return state["status"]
    try:
        if state["next_iteration"] == 0:
            baseline = await email_step(run_id, 0, {})
            await publish_step(run_id, 0, {
                "email": baseline["email"], "rewards": None, "training": None, "changed": {},
                "metrics": {"duration/email_s": baseline["seconds"]}, "started_at": datetime.fromisoformat(baseline["started_at"]),
            })
        for iteration in range(max(1, state["next_iteration"]), state["iterations_total"] + 1):
            generation = await generate_step(run_id, iteration)
            training = await train_step(run_id, iteration)
            reweighted = await reweight_step(run_id, iteration)
            email = await email_step(run_id, iteration, reweighted["changed"])
            metrics = generation["metrics"] | {
                "duration/train_s": training["metrics"].get("duration/train_s", 0.0),
                "duration/reweight_s": reweighted["seconds"], "duration/email_s": email["seconds"],
            }
            status = await publish_step(run_id, iteration, {
                "email": email["email"], "rewards": generation["rewards"], "training": training,
                "changed": reweighted["changed"], "metrics": metrics,
                "started_at": datetime.fromisoformat(generation["started_at"]), "trace_url": generation["trace_url"],
            })
            if status != "running":  # cancelled between steps
                return status
        await finish_step(run_id)
        return "succeeded"
    except StepFailed as failure:
        await fail_step(run_id, failure.step, failure.message)
        return "failed"


def workflow_id(run_id: str, attempt: int) -> str:
    return run_id if attempt == 1 else f"{run_id}.{attempt}"


async def enqueue(run_id: str, attempt: int = 1) -> None:
    """Idempotent: the workflow id is the run id (and the attempt, for a resumed run)."""
    with SetWorkflowID(workflow_id(run_id, attempt)):
        await DBOS.enqueue_workflow_async(RUNS_QUEUE, learning_run, run_id)


async def cancel(run_id: str, attempt: int) -> None:
    await DBOS.cancel_workflow_async(workflow_id(run_id, attempt))
