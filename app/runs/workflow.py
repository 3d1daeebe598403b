"""The learning loop: one durable DBOS workflow per run, composing the loop's steps.

This is the only driver of the loop: `POST /learn-loop`, `codreamer run`, the tests and the
benchmarks all execute it. Each step is a DBOS step, so a crash resumes at the last completed
one; steps are idempotent (generate replaces its trajectories, train checks the model's step
before training again, publish records an iteration only if it is not there yet, in one
transaction with its event). Any exception in any step ends the run `failed`, naming the step.
"""

import functools
import logging
import time
from datetime import datetime

from dbos import DBOS, SetWorkflowID
from sqlalchemy import select
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from app.db import describe, is_transient, utcnow
from app.runs.status import RunStatus, Step
from app.faults import fault_point
from app.knowledge_graph.graph import KnowledgeGraph, NodeScores, ScenarioScores
from app.loop import steps
from app.loop.feedback import create_feedback
from app.loop.schemas import RunConfig
from app.observability import call_with_trace
from app.runs import repository, transitions
from app.runs.executor import current
from app.runs.models import Iteration, Run

RUNS_QUEUE = "runs"
DB_RETRIES = 6  # with backoff capped at 8 s: rides out about half a minute of database trouble
log = logging.getLogger("codreamer")


class StepFailed(Exception):
    """A step's failure, named for the run's `error.step`."""

    def __init__(self, step: Step, message: str):
        super().__init__(step, message)
        self.step, self.message = step, message


def through_database_trouble(retries: int = DB_RETRIES) -> AsyncRetrying:
    """Re-runs an idempotent step after a passing database error (a dropped connection, a locked file)."""
    return AsyncRetrying(
        stop=stop_after_attempt(retries + 1), wait=wait_random_exponential(multiplier=0.5, max=8),
        retry=retry_if_exception(is_transient), reraise=True,
    )


def workflow_step(step: Step):
    """A DBOS step whose every failure becomes a StepFailed naming it, after retries of database trouble.

    The message is safe to show any caller (no SQL, parameters or trajectory text); the whole
    cause goes to the server log with the run id.
    """

    def wrap(fn):
        @functools.wraps(fn)
        async def guarded(run_id: str, *args, **kwargs):
            try:
                async for attempt in through_database_trouble():
                    with attempt:
                        return await fn(run_id, *args, **kwargs)
            except StepFailed:
                raise
            except Exception as exc:
                log.error("run %s: step %s failed", run_id, step.value, exc_info=exc)
                raise StepFailed(step, describe(exc)) from None

        return DBOS.step(name=step.value)(guarded)

    return wrap


async def _run(run_id: str) -> tuple[Run, RunConfig]:
    async with current().services.db.read() as session:
        run = await session.get(Run, run_id)
    return run, RunConfig.model_validate(run.config)


async def _context(run_id: str) -> tuple[Run, RunConfig, KnowledgeGraph, ScenarioScores]:
    run, config = await _run(run_id)
    services = current().services
    graph = await services.graphs.get(run.graph_id)
    async with services.db.read() as session:
        scores = await repository.current_scores(session, run_id)  # moved nodes only: no copy of the whole graph
    return run, config, graph, scores


@workflow_step(Step.START)
async def start_step(run_id: str) -> dict:
    """Marks the run running; a resumed run continues after its last recorded iteration."""
    async with current().services.db.transaction() as session:
        run = await transitions.begin(session, run_id)
        status, total = run.status, run.iterations_total
        latest = await repository.latest_iteration(session, run_id)
    current().wake_relay()
    fault_point(Step.START)
    return {"status": status, "iterations_total": total, "next_iteration": 0 if latest is None else latest + 1}


async def _distilled(run_id: str, iteration: int) -> dict | None:
    """What in-context learning distilled at `iteration` (None before the first, or without it)."""
    async with current().services.db.read() as session:
        return await session.scalar(select(Iteration.context).where(Iteration.run_id == run_id, Iteration.iteration == iteration))


@workflow_step(Step.GENERATE)
async def generate_step(run_id: str, iteration: int) -> dict:
    """Rollouts for every scenario, each group judged as soon as it is complete; stored with rewards.

    Each scenario's rollouts see its node scores and, when learning in context, what the previous
    iteration distilled for it.
    """
    started_at = utcnow().isoformat()
    run, config, graph, scores = await _context(run_id)
    contexts = await _distilled(run_id, iteration - 1) if config.in_context else None
    executor = current()
    policy = await executor.policy(run_id, run.config["backend"])
    feedback = create_feedback(graph)
    judge = executor.judge_named(config.judge)

    async def score(group):
        try:
            scored = await steps.score_group(group, judge, feedback, config, iteration=iteration)
            fault_point(Step.SCORE, iteration)
        except Exception as exc:
            log.error("run %s: scoring failed", run_id, exc_info=exc)
            raise StepFailed(Step.SCORE, describe(exc)) from None
        return scored

    generation, trace_url = await call_with_trace(
        steps.generate, policy, graph, [graph.scenarios[s] for s in config.scenario_ids],
        {s: scores.of(s) for s in config.scenario_ids}, config,
        iteration=iteration, concurrency=executor.settings.rollout_concurrency, score=score, contexts=contexts,
    )
    if not generation.groups:
        raise StepFailed(Step.SCORE, f"every group was dropped ({generation.metrics['dropped_groups']:.0f} by the judge, "
                                     f"{generation.metrics['rollout_exceptions']:.0f} rollout errors)")
    async with executor.services.db.transaction() as session:
        await repository.replace_trajectories(session, run_id, iteration, generation.groups)
    fault_point(Step.GENERATE, iteration)
    return {"started_at": started_at, "metrics": generation.metrics, "trace_url": trace_url,
            "rewards": steps.reward_stats(generation.groups).model_dump()}


@workflow_step(Step.TRAIN)
async def train_step(run_id: str, iteration: int) -> dict:
    run, config = await _run(run_id)
    executor = current()
    policy = await executor.policy(run_id, run.config["backend"])
    async with executor.services.db.read() as session:
        previous = await session.scalar(select(Iteration.training).where(Iteration.run_id == run_id, Iteration.iteration == iteration - 1))
        groups = await repository.load_groups(session, run_id, iteration)
    outcome = await steps.train(
        executor.backend(run.config["backend"]), policy.model, groups, config,
        step_before=(previous or {}).get("step", 0), retries=executor.settings.backend_retries,
    )
    fault_point(Step.TRAIN, iteration)
    return outcome.model_dump()


@workflow_step(Step.REWEIGHT)
async def reweight_step(run_id: str, iteration: int) -> dict:
    """What the next prompts will carry: node scores per scenario and, in context, the distilled lessons."""
    started = time.monotonic()
    _, config, _, scores = await _context(run_id)
    async with current().services.db.read() as session:
        groups = await repository.load_groups(session, run_id, iteration)
    changed = steps.reweight({s: scores.of(s) for s in config.scenario_ids}, groups, config)
    previous = await _distilled(run_id, iteration - 1) if config.in_context else None
    context = steps.distil(previous, groups, config, iteration=iteration)
    fault_point(Step.REWEIGHT, iteration)
    return {"changed": changed, "context": context, "seconds": time.monotonic() - started}


@workflow_step(Step.EMAIL)
async def email_step(run_id: str, iteration: int, changed: dict[str, dict[str, float]], context: dict | None = None) -> dict:
    """The published email, scored by the run's judge: the updated policy's greedy rollout for the target
    scenario, with its node scores and in-context lessons (or, when that wrote none, the iteration's best)."""
    started = utcnow()
    run, config, graph, scores = await _context(run_id)
    policy = await current().policy(run_id, run.config["backend"])
    target = graph.scenarios[config.target_scenario_id]
    target_scores = NodeScores(scores.of(target.id) | changed.get(target.id, {}))
    written = await steps.write_email(policy, graph, target, target_scores, config, (context or {}).get(target.id))
    email, score = written.email, None
    if email is not None:
        score = await steps.judge_email(written, current().judge_named(config.judge))
    elif iteration > 0:
        async with current().services.db.read() as session:
            best = steps.best_trajectory(await repository.load_groups(session, run_id, iteration), target.id)
        if best is not None:
            email, score = best.email, best.metrics.get("judge_score")
    if email is None:
        raise StepFailed(Step.EMAIL, f"the policy wrote no email for {target.id} within {config.max_turns} turns")
    fault_point(Step.EMAIL, iteration)
    return {"email": email.model_dump() | {"score": score}, "started_at": started.isoformat(),
            "seconds": (utcnow() - started).total_seconds()}


@workflow_step(Step.PUBLISH)
async def publish_step(run_id: str, iteration: int, record: dict) -> str:
    """Records the iteration (once) and returns the run's status."""
    run, _ = await _run(run_id)
    services = current().services
    graph = await services.graphs.get(run.graph_id)
    keep = services.settings.trajectory_retention_iterations
    async with services.db.transaction() as session:
        await transitions.record_iteration(session, graph, run_id, iteration, **record)
        status = (await session.get(Run, run_id)).status
        if keep:  # older conversations go; rewards, scores and emails stay
            await repository.drop_conversations(session, run_id, through=iteration - keep)
    current().wake_relay()
    fault_point(Step.PUBLISH, iteration)
    return status


@workflow_step(Step.FINISH)
async def finish_step(run_id: str) -> None:
    """Prunes checkpoints (keeping the latest and best), then marks the run succeeded."""
    run, config = await _run(run_id)
    policy = await current().policy(run_id, run.config["backend"])
    if policy.model.trainable and config.train_policy:
        await policy.model.delete_checkpoints(best_checkpoint_metric="train/reward")
    fault_point(Step.FINISH)
    async with current().services.db.transaction() as session:
        await transitions.finish(session, run_id)
    current().wake_relay()


@DBOS.step(name="fail")
async def fail_step(run_id: str, step: Step, message: str) -> None:
    async for attempt in through_database_trouble():
        with attempt:
            fault_point("fail")
            async with current().services.db.transaction() as session:
                await transitions.fail(session, run_id, step, message)
    current().wake_relay()


@DBOS.workflow(name="learning_run")
async def learning_run(run_id: str) -> str:
    try:
        state = await start_step(run_id)
        if state["status"] != RunStatus.RUNNING:
            return state["status"]
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
            email = await email_step(run_id, iteration, reweighted["changed"], reweighted.get("context"))
            metrics = generation["metrics"] | {
                "duration/train_s": training["metrics"].get("duration/train_s", 0.0),
                "duration/reweight_s": reweighted["seconds"], "duration/email_s": email["seconds"],
            }
            status = await publish_step(run_id, iteration, {
                "email": email["email"], "rewards": generation["rewards"], "training": training,
                "changed": reweighted["changed"], "metrics": metrics, "context": reweighted.get("context"),
                "started_at": datetime.fromisoformat(generation["started_at"]), "trace_url": generation["trace_url"],
            })
            if status != RunStatus.RUNNING:  # cancelled between steps
                return status
        await finish_step(run_id)
        return RunStatus.SUCCEEDED
    except StepFailed as failure:
        await fail_step(run_id, failure.step, failure.message)
        return RunStatus.FAILED
    finally:  # success, failure or cancellation: the worker lets go of the run, and of an unrecorded iteration
        await current().release(run_id)
        async with current().services.db.transaction() as session:
            await repository.drop_unrecorded_trajectories(session, run_id)


def workflow_id(run_id: str, attempt: int) -> str:
    return run_id if attempt == 1 else f"{run_id}.{attempt}"


async def enqueue(run_id: str, attempt: int = 1) -> None:
    """Idempotent: the workflow id is the run id (and the attempt, for a resumed run)."""
    with SetWorkflowID(workflow_id(run_id, attempt)):
        await DBOS.enqueue_workflow_async(RUNS_QUEUE, learning_run, run_id)


async def wait(run_id: str, attempt: int = 1) -> str:
    """The workflow's result, once DBOS has recorded it (a run's last event precedes that by a moment)."""
    handle = await DBOS.retrieve_workflow_async(workflow_id(run_id, attempt))
    return await handle.get_result()


async def cancel(run_id: str, attempt: int) -> None:
    await DBOS.cancel_workflow_async(workflow_id(run_id, attempt))
