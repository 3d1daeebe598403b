"""The learning loop: one durable DBOS workflow per run, composing the loop's steps.

This is the only driver of the loop: `POST /learn-loop`, `codreamer run`, the tests and the
benchmarks all execute it. Each step is a DBOS step, so a crash resumes at the last completed
one; steps are idempotent (generate replaces its trajectories, train checks the model's step
before training again, publish records an iteration only if it is not there yet, in one
transaction with its event). Any exception in any step ends the run `failed`, naming the step.
"""

import asyncio
import functools
import logging
import time
import typing
from datetime import datetime, timedelta

import numpy as np
from dbos import DBOS
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import select
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from app import tasks
from app.agent.schemas import Email, PublishedEmail
from app.backends.specs import SPECS, delete_local_files, delete_stored_checkpoints, model_name
from app.engine.executor import current
from app.engine.outcome_watch import OUTCOMES_TOPIC
from app.kit.db import describe, is_transient, utcnow
from app.kit.faults import fault_point
from app.kit.observability import call_with_trace
from app.knowledge_graph.graph import KnowledgeGraph, ScenarioScores
from app.loop.credit import reweight
from app.loop.email import best_trajectory, choose_by_outcomes, write_email
from app.loop.exploration import Exploration
from app.loop.features import segment
from app.loop.feedback import Feedback, OutcomeFeedback
from app.loop.generation import Policy, PreflightFailed, generate, preflight
from app.loop.in_context import distil
from app.loop.outcome_model import OutcomeModel
from app.loop.reward import Scorer, ScoringFailed, reward_stats, rollout_seed
from app.loop.schemas import FeedbackMode, FeedbackWait, TrainingOutcome
from app.loop.training import train
from app.outcomes import refs, simulated
from app.outcomes import repository as outcome_repository
from app.outcomes import service as outcomes
from app.outcomes.meaning import InterestScale
from app.outcomes.schemas import IngestResult
from app.runs import repository, trajectories, transitions
from app.runs.events import Waiting
from app.runs.models import Iteration, Run
from app.runs.records import (
    Contexts,
    EmailResult,
    GenerationResult,
    IterationRecord,
    ReweightResult,
    StartState,
    WaitState,
)
from app.runs.schemas import EffectiveConfig
from app.runs.status import RunStatus, Step

DB_RETRIES = 6  # with backoff capped at 8 s: rides out about half a minute of database trouble
log = logging.getLogger("codreamer")


class StepFailed(Exception):
    """A step's failure, named for the run's `error.step`."""

    def __init__(self, step: Step, message: str):
        super().__init__(step, message)
        self.step, self.message = step, message


class IncompatibleCheckpoint(StepFailed):
    """A recorded step output this version cannot read. Later steps are recorded too, so the failure
    cannot be a step of its own (DBOS would find it where the next recorded step was)."""


def through_database_trouble(retries: int = DB_RETRIES) -> AsyncRetrying:
    """Re-runs an idempotent step after a passing database error (a dropped connection, a locked file)."""
    return AsyncRetrying(
        stop=stop_after_attempt(retries + 1), wait=wait_random_exponential(multiplier=0.5, max=8),
        retry=retry_if_exception(is_transient), reraise=True,
    )


def workflow_step(step: Step, name: str | None = None):
    """A DBOS step whose every failure becomes a StepFailed naming it, after retries of database trouble.

    The message is safe to show any caller (no SQL, parameters or trajectory text); the whole
    cause goes to the server log with the run id. DBOS checkpoints the output's JSON form, not a
    pickle of our classes, and the workflow gets it back as the annotated type: a checkpoint from
    before the steps returned models (the same fields, as dicts) resumes as one, and one that no
    longer fits fails the run with a message saying so.
    """

    def wrap(fn):
        output = TypeAdapter(typing.get_type_hints(fn)["return"])

        async def checkpointed(run_id: str, *args):
            try:
                async for attempt in through_database_trouble():
                    with attempt:
                        return output.dump_python(await fn(run_id, *args), mode="json")
            except (StepFailed, transitions.RunGone):
                raise
            except ScoringFailed as exc:
                log.error("run %s: scoring failed", run_id, exc_info=exc.__cause__)
                raise StepFailed(Step.SCORE, describe(exc.__cause__)) from None
            except Exception as exc:
                if await _deleted(run_id):  # what the step wrote for a run deleted meanwhile failed (a foreign key)
                    raise transitions.RunGone(f"run {run_id!r} not found") from None
                log.error("run %s: step %s failed", run_id, step.value, exc_info=exc)
                message = describe(exc)
                if is_transient(exc):  # the database stayed out of reach through every retry (a full disk, an outage)
                    message += (". The database stayed out of reach through the step's retries. Resume it to continue "
                                "after its last recorded iteration")
                raise StepFailed(step, message) from None

        checkpointed = DBOS.step(name=name or step.value)(checkpointed)  # a name of its own where a step has two

        @functools.wraps(fn)
        async def typed(run_id: str, *args):
            recorded = await checkpointed(run_id, *args)
            try:
                return output.validate_python(recorded)
            except ValidationError as exc:
                log.error("run %s: the checkpoint of step %s does not fit this version", run_id, step.value, exc_info=exc)
                raise IncompatibleCheckpoint(step, f"this run was checkpointed by an incompatible version of the service "
                                       f"({exc.error_count()} field(s) of the {step.value} step's output differ); "
                                       f"resume it to continue after its last recorded iteration") from None

        return typed

    return wrap


async def _deleted(run_id: str) -> bool:
    """Whether the run is gone (False when that cannot be read either: the step's failure is then reported as is)."""
    try:
        async with current().services.db.read() as session:
            return await session.get(Run, run_id) is None
    except Exception:  # noqa: BLE001 - the step's own error is the one to report
        return False


async def _run(run_id: str) -> tuple[Run, EffectiveConfig]:
    """The run and what it executes with, typed."""
    async with current().services.db.read() as session:
        run = await session.get(Run, run_id)
    if run is None:
        raise transitions.RunGone(f"run {run_id!r} not found")
    return run, run.effective_config


async def _context(run_id: str) -> tuple[Run, EffectiveConfig, KnowledgeGraph, ScenarioScores]:
    run, config = await _run(run_id)
    services = current().services
    graph = (await services.graphs.get(run.graph_id)).signed_by(config.sender)
    async with services.db.read() as session:
        scores = await repository.current_scores(session, run_id)  # moved nodes only: no copy of the whole graph
    return run, config, graph, scores


@workflow_step(Step.START)
async def start_step(run_id: str) -> StartState:
    """Marks the run running and checks that its model takes the run's requests; a resumed run continues after
    its last recorded iteration."""
    async with current().services.db.transaction() as session:
        run = await transitions.begin(session, run_id)
        status, total = run.status, run.iterations_total
        config = run.effective_config
        latest = await repository.latest_iteration(session, run_id)
    current().wake_relay()
    if status == RunStatus.RUNNING:
        graph = await current().services.graphs.get(run.graph_id)
        try:
            await preflight(await current().policy(run_id, config.backend), graph,
                            graph.scenarios[config.target_scenario_id], config)
        except PreflightFailed as exc:
            raise StepFailed(Step.START, str(exc)) from None
    fault_point(Step.START)
    return StartState(status=status, iterations_total=total, next_iteration=0 if latest is None else latest + 1,
                      initial_context=run.initial_context,
                      simulated_sends=config.feedback_source == FeedbackMode.SIMULATED, feedback_wait=config.feedback_wait,
                      max_steps_off_policy=config.max_steps_off_policy)


_CONTEXTS = TypeAdapter(Contexts | None)


async def _previous_context(run_id: str, iteration: int, pending: list[ReweightResult]) -> Contexts | None:
    """What in-context learning distilled at the iteration before (None before the first, or without it): the
    latest pending reweight's, or else the recorded iteration's."""
    if pending:
        return pending[-1].context
    async with current().services.db.read() as session:
        stored = await session.scalar(select(Iteration.context).where(Iteration.run_id == run_id, Iteration.iteration == iteration - 1))
    return _CONTEXTS.validate_python(stored)


def _with_pending(scores: ScenarioScores, pending: list[ReweightResult]) -> ScenarioScores:
    """The recorded scores with the pending reweights' moves on top, in order. Each move is a score, not a delta,
    so a reweight published meanwhile (its moves already in `scores`) gives the same result."""
    merged = ScenarioScores({scenario: dict(moved) for scenario, moved in scores.items()})
    for reweighted in pending:
        for scenario, moved in reweighted.changed.items():
            merged[scenario] = merged.get(scenario, {}) | moved
    return merged


async def _last_trained_step(run_id: str, policy: Policy) -> int:
    async with current().services.db.read() as session:
        step = await repository.last_trained_step(session, run_id)
    return await policy.model.get_step() if step is None else step


@workflow_step(Step.GENERATE)
async def generate_step(run_id: str, iteration: int, pending: list[ReweightResult], policy_step: int | None) -> GenerationResult:
    """Rollouts for every scenario, each group judged as soon as it is complete; stored with rewards.

    Each scenario's rollouts see its node scores and, when learning in context, what the previous
    iteration distilled for it, `pending` included (reweights computed but not yet published, when
    iterations overlap). A pipelined run pins the policy to `policy_step`, as the workflow fixed it (None:
    the last recorded training's), even if a later step finishes meanwhile; every trajectory records the
    step it was sampled from.
    """
    started_at = utcnow()
    run, config, graph, scores = await _context(run_id)
    scores = _with_pending(scores, pending)
    contexts = await _previous_context(run_id, iteration, pending) if config.in_context else None
    executor = current()
    policy = await executor.policy(run_id, config.backend)
    sampled_step = None
    if policy.model.trainable:
        sampled_step = policy_step if policy_step is not None else await _last_trained_step(run_id, policy)
        if config.max_steps_off_policy:
            policy = policy.at(sampled_step)
    feedback = await _feedback(run, config, graph)
    scorer = Scorer(executor.judge_named(config.judge), feedback, config, iteration)
    # Before the first send nothing a rollout tries can be sent (the published email is the greedy one until outcomes
    # exist): exploration starts with the outcome model.
    exploration = (Exploration(feedback.model, graph, config.exploration)
                   if isinstance(feedback, OutcomeFeedback) and feedback.model.positive is not None and config.exploration > 0
                   else None)
    generation, trace_url = await call_with_trace(
        generate, policy, graph, [graph.scenarios[s] for s in config.scenario_ids],
        {s: scores.of(s) for s in config.scenario_ids}, config,
        iteration=iteration, concurrency=executor.settings.rollout_concurrency, score=scorer, contexts=contexts,
        exploration=exploration,
    )
    if not generation.groups:
        judge_failed = f"; {scorer.stats.failure()}" if scorer.stats.dropped else ""
        raise StepFailed(Step.SCORE, f"every group was dropped ({generation.metrics['dropped_groups']:.0f} by the judge, "
                                     f"{generation.metrics['rollout_exceptions']:.0f} rollout errors){judge_failed}")
    for group in generation.groups:
        for trajectory in group.trajectories:
            trajectory.initial_policy_version = sampled_step
    async with executor.services.db.transaction() as session:
        await trajectories.replace_trajectories(session, run, graph, iteration, generation.groups, executor.settings.message_id_domain)
    fault_point(Step.GENERATE, iteration)
    metrics = generation.metrics | scorer.stats.metrics() | ({} if sampled_step is None else {"policy_step": float(sampled_step)})
    return GenerationResult(started_at=started_at, metrics=metrics, trace_url=trace_url,
                            rewards=reward_stats(generation.groups), sampled_step=sampled_step)


@workflow_step(Step.TRAIN)
async def train_step(run_id: str, iteration: int, step_before: int | None) -> TrainingOutcome:
    """One GRPO step on the iteration's groups, from `step_before` (the previous iteration's training, which a
    pipelined run may not have recorded yet; None: read from its record)."""
    _, config = await _run(run_id)
    executor = current()
    policy = await executor.policy(run_id, config.backend)
    async with executor.services.db.read() as session:
        if step_before is None:
            previous = await session.scalar(select(Iteration.training).where(Iteration.run_id == run_id, Iteration.iteration == iteration - 1))
            step_before = TrainingOutcome.model_validate(previous).step if previous else 0
        groups = await trajectories.load_groups(session, run_id, iteration)
    outcome = await train(
        executor.backend(config.backend), policy.model, groups, config,
        step_before=step_before, retries=executor.settings.backend_retries,
    )
    fault_point(Step.TRAIN, iteration)
    return outcome


@workflow_step(Step.REWEIGHT)
async def reweight_step(run_id: str, iteration: int, pending: list[ReweightResult]) -> ReweightResult:
    """What the next prompts will carry: node scores per scenario and, in context, the distilled lessons."""
    started = time.monotonic()
    _, config, _, scores = await _context(run_id)
    scores = _with_pending(scores, pending)
    async with current().services.db.read() as session:
        groups = await trajectories.load_groups(session, run_id, iteration)
    changed = reweight({s: scores.of(s) for s in config.scenario_ids}, groups, config)
    previous = await _previous_context(run_id, iteration, pending) if config.in_context else None
    context = distil(previous, groups, config, iteration=iteration)
    fault_point(Step.REWEIGHT, iteration)
    return ReweightResult(changed=changed, context=context, seconds=time.monotonic() - started)


@workflow_step(Step.EMAIL)
async def email_step(run_id: str, iteration: int, pending: list[ReweightResult], policy_step: int | None) -> EmailResult:
    """The published email, scored by the run's judge: the updated policy's greedy rollout for the target
    scenario, with the node scores and in-context lessons of this iteration's reweight (the last of `pending`),
    or, when that wrote none, the iteration's best. `policy_step` pins the checkpoint this iteration trained to
    (a pipelined run trains the next one meanwhile)."""
    started = utcnow()
    run, config, graph, scores = await _context(run_id)
    policy = await current().policy(run_id, config.backend)
    if policy_step is not None and policy.model.trainable:
        policy = policy.at(policy_step)
    target = graph.scenarios[config.target_scenario_id]
    target_scores = _with_pending(scores, pending).of(target.id)
    context = pending[-1].context if pending else _CONTEXTS.validate_python(run.initial_context) if iteration == 0 else None
    written = await write_email(policy, graph, target, target_scores, config, current().judge_named(config.judge),
                                (context or {}).get(target.id), seed=rollout_seed(config.seed, iteration, target.id, -1))
    email, score, source = (written.email.email if written.email else None), written.score, written.source
    if email is not None and score is not None and iteration > 0 and config.feedback_source in LEARNT_FROM_SENDS:
        email, score, source = await _choose_by_outcomes(run, config, graph, iteration, (email, score, source))
    if email is None and iteration > 0:
        async with current().services.db.read() as session:
            best = best_trajectory(await trajectories.load_groups(session, run_id, iteration), target.id)
        if best is not None:
            email, score, source = best.email, best.metrics.get("judge_score"), "best_of_iteration"
    if email is None:
        raise StepFailed(Step.EMAIL, written.failure(target.id, config.max_turns)
                         + (", and no trajectory of the iteration wrote one either" if iteration else ""))
    fault_point(Step.EMAIL, iteration)
    ref = refs.email_ref(run_id, iteration, refs.PUBLISHED)
    traced = {"ref": ref, "message_id": refs.message_id(ref, current().settings.message_id_domain)}
    return EmailResult(email=email.model_dump() | {"score": score} | traced, started_at=started,
                       seconds=(utcnow() - started).total_seconds(), attempts=len(written.attempts), source=source)


LEARNT_FROM_SENDS = (FeedbackMode.OUTCOMES, FeedbackMode.SIMULATED)


async def _choose_by_outcomes(run: Run, config: EffectiveConfig, graph: KnowledgeGraph, iteration: int,
                              greedy: tuple[Email, float, str]) -> tuple[Email, float, str]:
    """The email to send among the greedy one and the iteration's judged candidates for the target, by a draw from
    the outcome model (`app.loop.email.choose_by_outcomes`)."""
    feedback = await _feedback(run, config, graph)
    async with current().services.db.read() as session:
        groups = await trajectories.load_groups(session, run.id, iteration)
    target = config.target_scenario_id
    candidates = [greedy[:2]] + [(t.email, t.metrics["judge_score"]) for g in groups for t in g.trajectories
                                 if t.scenario_id == target and t.email and "judge_score" in t.metrics]
    rng = np.random.default_rng(rollout_seed(config.seed, iteration, target, -2))
    chosen = choose_by_outcomes(candidates, feedback, target, config.feedback_weight, rng)
    return greedy if chosen == 0 else (*candidates[chosen], "chosen_by_outcomes")


@workflow_step(Step.PUBLISH)
async def publish_step(run_id: str, record: IterationRecord) -> RunStatus:
    """Records the iteration (once) and returns the run's status."""
    run, _ = await _run(run_id)
    services = current().services
    graph = await services.graphs.get(run.graph_id)
    keep = services.settings.trajectory_retention_iterations
    async with services.db.transaction() as session:
        await transitions.record_iteration(session, graph, run_id, record)
        status = (await session.get(Run, run_id)).status
        if keep:  # older conversations go; rewards, scores and emails stay
            await repository.drop_conversations(session, run_id, through=record.iteration - keep)
    current().wake_relay()
    fault_point(Step.PUBLISH, record.iteration)
    return status


@workflow_step(Step.SEND)
async def send_step(run_id: str, iteration: int, email: PublishedEmail) -> IngestResult:
    """On `simulated` feedback: the demo's provider sends the published email (and with simulated_ab each candidate
    of the target scenario) and reports what the world's readers did in this iteration's span of the world's time,
    with the late reactions to the emails of the iterations before (`app.outcomes.simulated`: time is compressed, an
    iteration stands for a reply window)."""
    run, config = await _run(run_id)
    services = current().services
    graph = await services.graphs.get(run.graph_id)
    world, target = simulated.world_for(graph, config.seed), config.target_scenario_id
    latest = simulated.LATE_ITERATIONS
    async with services.db.read() as session:
        earlier = dict((await session.execute(select(Iteration.iteration, Iteration.email).where(
            Iteration.run_id == run_id, Iteration.iteration >= iteration - latest, Iteration.iteration < iteration))).all())
    result = IngestResult(accepted=0, duplicates=0, unattributed=0)
    for sent_iteration in range(max(0, iteration - latest), iteration + 1):
        published = email if sent_iteration == iteration else earlier.get(sent_iteration)
        if published is None:
            continue
        published = PublishedEmail.model_validate(published)
        sends = [(published, simulated.SENDS, -1)]
        if config.simulated_ab and sent_iteration > 0:
            async with services.db.read() as session:
                candidates = await repository.trajectory_emails(session, run_id, sent_iteration, target)
            sends += [(candidate, simulated.AB_SENDS, position) for position, candidate in candidates]
        sent_at = simulated.campaign_sent_at(run.created_at, run.iterations_total, sent_iteration)
        report = simulated.window(sent_iteration, iteration)
        for sent, recipients, slot in sends:
            seed = rollout_seed(config.seed, sent_iteration, target, slot)
            got = await outcomes.send_simulated(services.db, services.secrets, services.settings, run.tenant, world,
                                                target, sent, sent.ref, sent.message_id, seed, sent_at, report,
                                                sends=recipients)
            result = IngestResult(**{k: getattr(result, k) + getattr(got, k) for k in ("accepted", "duplicates", "unattributed")})
    return result


async def _feedback(run: Run, config: EffectiveConfig, graph: KnowledgeGraph) -> Feedback | None:
    """What scoring blends with the judge: the outcome model of what was sent (the tenant's on this graph, or on
    `simulated` this run's own), the oracle (benchmarks), or nothing."""
    if config.feedback_source == FeedbackMode.NONE:
        return None
    if config.feedback_source == FeedbackMode.ORACLE:
        return simulated.world_for(graph, config.seed)
    settings = current().settings
    scope = {"run_id": run.id} if config.feedback_source == FeedbackMode.SIMULATED else {"graph_id": run.graph_id}
    scale = InterestScale.of(settings.reply_interest)
    async with current().services.db.read() as session:
        sent = await outcome_repository.sent_emails(
            session, run.tenant, mature_before=utcnow() - timedelta(seconds=settings.reply_window_s), scale=scale, **scope)
    prospects = {s.id: (s.prospect.name, s.prospect.company, segment(s.prospect.role, s.prospect.industry))
                 for s in graph.scenarios.values()}
    # off the event loop: a team's weeks of sends take seconds to fit
    model = await asyncio.to_thread(OutcomeModel.fit, sent, settings.outcome_prior_sends, scale.bottom / scale.top)
    return OutcomeFeedback(model, prospects)


WAIT_POLL_S = 60.0  # a waiting run also looks this often itself (its worker's outcome watch wakes it sooner)


async def _wait_state(run_id: str, iteration: int, wait: FeedbackWait, until) -> WaitState:
    async with current().services.db.read() as session:
        delivered = (await outcome_repository.delivered(session, {run_id: iteration})).get(run_id, 0)
    remaining = (until - utcnow()).total_seconds()
    return WaitState(until=until, delivered=delivered, done=delivered >= wait.min_delivered or remaining <= 0,
                     remaining_s=max(0.0, remaining))


@workflow_step(Step.WAIT)
async def wait_begin_step(run_id: str, iteration: int, wait: FeedbackWait) -> WaitState:
    """Records the deadline and, unless the outcomes are there already, says that the run waits."""
    state = await _wait_state(run_id, iteration, wait, utcnow() + timedelta(seconds=wait.timeout_s))
    if not state.done:
        async with current().services.db.transaction() as session:
            await transitions.wait(session, run_id, Waiting(iteration=iteration, min_delivered=wait.min_delivered,
                                                            delivered=state.delivered, until=state.until))
        current().wake_relay()
    return state


@workflow_step(Step.WAIT, name="wait_check")
async def wait_check_step(run_id: str, iteration: int, wait: FeedbackWait, until: datetime) -> WaitState:
    state = await _wait_state(run_id, iteration, wait, until)
    if state.done:
        async with current().services.db.transaction() as session:
            await transitions.stop_waiting(session, run_id)
    return state


async def await_outcomes(run_id: str, iteration: int, wait: FeedbackWait) -> None:
    """Durably: the deadline and each look are steps, each sleep a DBOS recv that the worker's outcome watch ends
    early when new outcomes are stored."""
    state = await wait_begin_step(run_id, iteration, wait)
    watch = current().outcome_watch
    try:
        while not state.done:
            watch.watch(run_id, DBOS.workflow_id, iteration, state.delivered)
            await DBOS.recv_async(OUTCOMES_TOPIC, timeout_seconds=min(WAIT_POLL_S, state.remaining_s))
            state = await wait_check_step(run_id, iteration, wait, state.until)
    finally:
        watch.unwatch(run_id)


@workflow_step(Step.FINISH)
async def finish_step(run_id: str) -> None:
    """Prunes the run's checkpoints (keeping the latest and best) where its backend does not keep them all, then marks
    the run succeeded."""
    _, config = await _run(run_id)
    policy = await current().policy(run_id, config.backend)
    if policy.model.trainable and config.train_policy and not SPECS[config.backend].keeps_every_checkpoint:
        await policy.model.delete_checkpoints(best_checkpoint_metric="train/reward")
    fault_point(Step.FINISH)
    async with current().services.db.transaction() as session:
        await transitions.finish(session, run_id)
    current().wake_relay()


async def record_failure(run_id: str, step: Step, message: str) -> None:
    async for attempt in through_database_trouble():
        with attempt:
            fault_point("fail")
            async with current().services.db.transaction() as session:
                await transitions.fail(session, run_id, step, message)
    current().wake_relay()


fail_step = DBOS.step(name="fail")(record_failure)


async def let_go(run_id: str) -> None:
    """What the worker holds for a run it stops executing, and what a deleted run's last step left behind.

    A run may be deleted as soon as it is finished (cancelled mid-step, say): a step still in flight
    then writes for nobody (a policy checkpoint, ART's log folder), so that goes too.
    """
    executor = current()
    try:
        async with executor.services.db.transaction() as session:
            gone = await session.get(Run, run_id) is None
            if gone:
                await delete_stored_checkpoints(session, model_name(executor.settings, run_id))
            else:
                await repository.drop_unrecorded_trajectories(session, run_id)
        if gone:
            await asyncio.to_thread(delete_local_files, executor.settings, model_name(executor.settings, run_id))
    finally:  # last: while the worker holds the run, what it left behind may still be there
        await executor.release(run_id)


@DBOS.workflow(name=tasks.LEARNING_RUN.name)
async def learning_run(run_id: str) -> str | None:
    """The run's status when its workflow ends; None when the run was deleted meanwhile."""
    interrupted = False
    try:
        state = await start_step(run_id)
        if state.status != RunStatus.RUNNING:
            return state.status
        if state.next_iteration == 0:
            baseline = await email_step(run_id, 0, [], None)
            status = await publish_step(run_id, IterationRecord(
                iteration=0, email=baseline.email, metrics={"duration/email_s": baseline.seconds, "email/attempts": float(baseline.attempts)},
                started_at=baseline.started_at, context=state.initial_context,
            ))
            if state.simulated_sends and status == RunStatus.RUNNING:
                await send_step(run_id, 0, baseline.email)
            if state.feedback_wait and status == RunStatus.RUNNING:
                await await_outcomes(run_id, 0, state.feedback_wait)
        # Pipelined (s = max_steps_off_policy ≥ 1), each stage n runs three sides at once: iteration n trains,
        # iteration n + s generates on the policy of step n − 1, and iteration n − 1 writes and publishes its email.
        # In strict order (s = 0) each iteration generates, trains and publishes before the next begins. A stage
        # starts its sides' first steps in a fixed order and only the publishing side takes more steps before it
        # ends, so DBOS numbers the steps the same way on every replay.
        ahead = state.max_steps_off_policy
        lag = 1 if ahead else 0  # how many stages publishing trails training
        first, last = max(1, state.next_iteration), state.iterations_total
        generations: dict[int, GenerationResult] = {}
        reweights: dict[int, ReweightResult] = {}  # computed but not yet published, by iteration
        trained: dict[int, TrainingOutcome] = {}

        def pending(through: int) -> list[ReweightResult]:
            return [reweights[n] for n in sorted(reweights) if n <= through]

        def step_of(iteration: int) -> int | None:
            return trained[iteration].step if iteration in trained else None

        def step_before_training(stage: int) -> int | None:
            """The policy the stage's overlapped iteration samples: the previous training's step or, in an attempt's
            first stage, the one the iteration in training was sampled from. Never the latest checkpoint read when
            the step runs: the stage's training may have finished by then, and a replay after a crash must sample as
            the first execution did."""
            return step_of(stage - 1) if stage - 1 in trained else generations[stage].sampled_step

        async def produce(iteration: int, policy_step: int | None) -> None:
            generations[iteration] = await generate_step(run_id, iteration, pending(iteration - 1), policy_step)
            reweights[iteration] = await reweight_step(run_id, iteration, pending(iteration - 1))

        async def publish(iteration: int) -> RunStatus:
            email = await email_step(run_id, iteration, pending(iteration), step_of(iteration))
            generation, reweighted, training = generations.pop(iteration), reweights[iteration], trained[iteration]
            metrics = generation.metrics | {
                "duration/train_s": training.metrics.get("duration/train_s", 0.0),
                "duration/reweight_s": reweighted.seconds, "duration/email_s": email.seconds,
                "email/attempts": float(email.attempts), "email/from_best_of_iteration": float(email.source == "best_of_iteration"),
                "email/chosen_by_outcomes": float(email.source == "chosen_by_outcomes"),
            }
            status = await publish_step(run_id, IterationRecord(
                iteration=iteration, email=email.email, rewards=generation.rewards, training=training,
                changed=reweighted.changed, metrics=metrics, context=reweighted.context,
                started_at=generation.started_at, trace_url=generation.trace_url,
            ))
            del reweights[iteration]
            if state.simulated_sends and status == RunStatus.RUNNING:
                await send_step(run_id, iteration, email.email)
            if state.feedback_wait and status == RunStatus.RUNNING and iteration < last:
                await await_outcomes(run_id, iteration, state.feedback_wait)
            return status

        async def train_iteration(iteration: int) -> None:
            trained[iteration] = await train_step(run_id, iteration, step_of(iteration - 1))

        for stage in range(first, last + lag + 1):
            for n in range(stage, min(stage + max(ahead, 1), last + 1)):
                if n not in generations and n not in trained:  # strict order, and a pipelined run's first s
                    await produce(n, step_of(stage - 1))
            overlapped = stage + ahead if ahead and stage + ahead <= last else None
            publishing = bool(lag) and stage - 1 >= first
            sides = [publish(stage - 1)] if publishing else []
            if stage <= last:
                sides.append(train_iteration(stage))
            if overlapped is not None:
                sides.append(generate_step(run_id, overlapped, pending(overlapped - 1), step_before_training(stage)))
            outcomes = await asyncio.gather(*sides, return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
            status = outcomes[0] if publishing else RunStatus.RUNNING
            if not lag:
                status = await publish(stage)
            if status != RunStatus.RUNNING:  # cancelled between steps
                return status
            if overlapped is not None:
                generations[overlapped] = outcomes[-1]
                reweights[overlapped] = await reweight_step(run_id, overlapped, pending(overlapped - 1))
        await finish_step(run_id)
        return RunStatus.SUCCEEDED
    except IncompatibleCheckpoint as failure:
        await record_failure(run_id, failure.step, failure.message)
        return RunStatus.FAILED
    except StepFailed as failure:
        await fail_step(run_id, failure.step, failure.message)
        return RunStatus.FAILED
    except transitions.RunGone:
        log.info("run %s was deleted while its workflow ran; it stops here", run_id)
        return None
    except asyncio.CancelledError:
        # Only a shutdown cancels the task (a user's cancel reaches the workflow as DBOS's own error, between steps).
        # The run stays running for recovery, and DBOS is already gone: nothing may be recorded now, and an error
        # from a database being closed would reach DBOS as the workflow's outcome.
        interrupted = True
        raise
    finally:  # success, failure, cancellation or deletion: the worker lets go of the run
        if not interrupted:
            await let_go(run_id)

