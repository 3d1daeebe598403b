"""A run's state changes, each in the caller's transaction with the event that announces it."""

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.events import service as events
from app.events.models import Event
from app.events.schemas import Receiver, RunEventData
from app.kit import errors
from app.kit.db import utcnow
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.models import Graph
from app.outcomes import notices, refs
from app.runs import repository
from app.runs.events import (
    IterationCompletedData,
    RunCancelledData,
    RunFailedData,
    RunReplyReceivedData,
    RunStartedData,
    RunSucceededData,
    RunWaitingData,
    Waiting,
)
from app.runs.models import Iteration, NodeScore, NodeScoreChange, Run
from app.runs.records import IterationRecord
from app.runs.status import RunError, RunStatus, Step

FULL_SCORES_MAX_NODES = 2000
TRUNCATED_TOP = 500


class Conflict(errors.Conflict):
    """The run is not in a state that allows the change; the message says which."""


class RunGone(errors.NotFound, LookupError):
    """The run was deleted (a finished run may be, while its workflow is still letting go of it)."""


async def locked_run(session: AsyncSession, run_id: str) -> Run:
    run = await session.get(Run, run_id, with_for_update=True, populate_existing=True)
    if run is None:
        raise RunGone(f"run {run_id!r} not found")
    return run


async def _announce(session: AsyncSession, run: Run, payload_type: type[RunEventData], **data) -> Event:
    run.last_seq += 1
    receiver = Receiver(run.webhook_url, run.webhook_secret) if run.webhook_url else None
    return await events.emit(session, repository.subject(run), payload_type(run_id=run.id, seq=run.last_seq, **data), receiver)


@notices.listen
async def announce_reply(session: AsyncSession, notice: notices.ReplyNotice) -> None:
    """`reply.received` for a reply to one of the run's own emails (a draft's reply is its batch's)."""
    if notice.draft_batch_id is not None:
        return
    run = await session.get(Run, notice.run_id, with_for_update=True, populate_existing=True)
    if run is not None:
        await _announce(session, run, RunReplyReceivedData, ref=notice.ref, category=notice.category,
                        confidence=notice.confidence, iteration=notice.iteration)


def webhook_scores(graph: KnowledgeGraph, moved: dict[str, float], changed: dict[str, float]) -> dict:
    """Every score up to 2,000 nodes; above, the 500 highest plus this iteration's changes."""
    if len(graph.nodes) <= FULL_SCORES_MAX_NODES:
        return {"node_scores": repository.full_scores(graph, moved)}
    top = sorted(moved.items(), key=lambda kv: -kv[1])[:TRUNCATED_TOP]
    if len(top) < TRUNCATED_TOP:  # pad with unmoved nodes, all at 1.0
        for node_id in graph.nodes:
            if len(top) >= TRUNCATED_TOP:
                break
            if node_id not in moved:
                top.append((node_id, 1.0))
    return {"node_scores": dict(top) | changed, "truncated": True}


async def begin(session: AsyncSession, run_id: str) -> Run:
    run = await locked_run(session, run_id)
    if run.status == RunStatus.QUEUED:
        run.status, run.started_at = RunStatus.RUNNING, run.started_at or utcnow()
        await _announce(session, run, RunStartedData, attempt=run.attempt)
    return run


async def resume(session: AsyncSession, run_id: str) -> Run:
    """A failed run starts again from its last recorded iteration, as a new workflow attempt."""
    run = await locked_run(session, run_id)
    if run.status != RunStatus.FAILED:
        raise Conflict(f"run {run_id} is {run.status}; only failed runs can be resumed")
    stored = await session.scalar(select(Graph.created_at).where(Graph.id == run.graph_id))
    if stored is not None and stored > run.created_at:  # a run keeps the graph it started with
        raise Conflict(f"graph {run.graph_id!r} was replaced after run {run_id} started; start a new run")
    run.status, run.error, run.finished_at = RunStatus.QUEUED, None, None
    run.attempt += 1
    return run


async def record_iteration(session: AsyncSession, graph: KnowledgeGraph, run_id: str, record: IterationRecord) -> bool:
    """The iteration, its score changes and its event, exactly once; False if already there or cancelled.

    `record.changed` holds, per scenario, the node scores that moved. The iteration's `node_scores_changed`
    and the webhook's `node_scores` are the run's single map: the mean over its scenarios.
    """
    run = await locked_run(session, run_id)
    if run.status != RunStatus.RUNNING or await session.get(Iteration, (run_id, record.iteration)) is not None:
        return False
    for scenario_id, moved in record.changed.items():
        for node_id, score in moved.items():
            await session.merge(NodeScore(run_id=run_id, scenario_id=scenario_id, node_id=node_id, score=score))
            session.add(NodeScoreChange(run_id=run_id, iteration=record.iteration, scenario_id=scenario_id, node_id=node_id, score=score))
    await session.flush()
    mean = (await repository.current_scores(session, run_id)).mean(run.effective_config.scenario_ids)
    changed_mean = {node_id: mean[node_id] for node_id in sorted({n for moved in record.changed.values() for n in moved})}
    session.add(Iteration.of(run_id, record, node_scores_changed=changed_mean, finished_at=utcnow()))
    if record.email is not None and record.email.ref is not None:
        target = run.effective_config.target_scenario_id
        # merged: a run forked back before this iteration recorded its ref already
        await session.merge(repository.email_ref(run, graph, record.iteration, refs.PUBLISHED, target, record.email, record.email.score))
    if record.iteration > 0:
        run.iterations_completed = record.iteration
    await _announce(session, run, IterationCompletedData, iteration=record.iteration, email=record.email, rewards=record.rewards,
                    **webhook_scores(graph, mean, changed_mean))
    return True


async def finish(session: AsyncSession, run_id: str) -> None:
    run = await locked_run(session, run_id)
    if run.status != RunStatus.RUNNING:
        return
    run.status, run.finished_at, run.waiting = RunStatus.SUCCEEDED, utcnow(), None
    await _announce(session, run, RunSucceededData, iterations_completed=run.iterations_completed,
                    **await repository.published(session, run_id))


async def fail(session: AsyncSession, run_id: str, step: Step | None, message: str) -> None:
    run = await session.get(Run, run_id, with_for_update=True, populate_existing=True)
    if run is None or run.status.terminal:  # deleted once cancelled, or already ended
        return
    run.status, run.finished_at, run.waiting = RunStatus.FAILED, utcnow(), None
    error = RunError(message=message, step=step)
    run.error = error.model_dump(mode="json")
    await _announce(session, run, RunFailedData, iterations_completed=run.iterations_completed, error=error)


async def wait(session: AsyncSession, run_id: str, waiting: Waiting) -> bool:
    """The run says what it waits for (once per wait); False when it is no longer running."""
    run = await locked_run(session, run_id)
    if run.status != RunStatus.RUNNING:
        return False
    if run.waiting is None:
        run.waiting = waiting.model_dump(mode="json")
        await _announce(session, run, RunWaitingData, waiting=waiting)
    return True


async def stop_waiting(session: AsyncSession, run_id: str) -> None:
    run = await locked_run(session, run_id)
    run.waiting = None


async def cancel(session: AsyncSession, run_id: str) -> Run:
    run = await locked_run(session, run_id)
    if run.status.terminal:
        raise Conflict(f"run {run_id} already {run.status}; only queued or running runs can be cancelled")
    run.status, run.finished_at, run.waiting = RunStatus.CANCELLED, utcnow(), None
    await _announce(session, run, RunCancelledData, iterations_completed=run.iterations_completed,
                    **await repository.published(session, run_id))
    return run
