"""A draft batch's durable workflows: the prospects in chunks, each chunk a workflow of its own on the chunks queue
(any worker drafts it), whose one step drafts the chunk's prospects not yet drafted and stores them in one transaction.
The batch's workflow enqueues its chunks, waits for every one, then ends the batch and writes its outcome event, once
(its webhook, if any, goes out through the outbox relay: a receiver never holds the batch's queue slot).
Killed mid-batch, each workflow resumes where it stopped (a chunk at its step, the batch at the chunk it waits for) and
every prospect ends up drafted exactly once. Only workers import this module (it imports the loop)."""

import asyncio
import logging

from dbos import DBOS, WorkflowHandleAsync

from app import tasks
from app.drafts import repository, service
from app.drafts.events import DraftBatchFailedData, DraftBatchSucceededData
from app.drafts.models import Draft, DraftBatch
from app.drafts.schemas import BatchStatus, DraftEmail
from app.drafts.writing import DraftingFailed, write_for, writer
from app.engine.executor import current
from app.events import service as events
from app.events.schemas import Receiver
from app.kit.db import describe, utcnow
from app.loop.email import Written
from app.loop.reward import rollout_seed
from app.outcomes import refs
from app.outcomes import repository as outcomes
from app.outcomes.service import suppressions_of

CHUNK = 25  # prospects per chunk: what a crash can make a worker draft again
CHUNK_POLL_S = 0.2  # how often a batch looks whether the chunk it waits for has ended (as often as the queue is polled)
log = logging.getLogger("codreamer")


@DBOS.step(name="draft_start")
async def start_step(batch_id: str) -> int:
    async with current().services.db.transaction() as session:
        batch = await session.get(DraftBatch, batch_id)
        if batch is None:
            return 0
        if batch.status == BatchStatus.QUEUED:
            batch.status = BatchStatus.RUNNING
        return batch.count


@DBOS.step(name="draft_chunk")
async def draft_chunk_step(batch_id: str, start: int, end: int) -> int:
    """Drafts the chunk's prospects not drafted yet, each with the policy drawn for it; returns how many it drafted."""
    executor = current()
    services = executor.services
    async with services.db.read() as session:
        batch = await session.get(DraftBatch, batch_id)
        if batch is None:
            return 0
        pending = await repository.pending(session, batch_id, start, end)
        # a suppressed prospect is drafted as such, with no email (the batch goes on)
        holds = await suppressions_of(session, services.secrets, batch.tenant,
                                      [row.prospect.get("email") for row in pending])
    if not pending:
        return 0
    suppressed = {row.position: hold.model_dump(mode="json", include={"reason", "until"})
                  for row, hold in zip(pending, holds, strict=True) if hold is not None}
    pending = [row for row in pending if row.position not in suppressed]
    graph = await services.graphs.get(batch.graph_id)
    writers = {key: await writer(executor, graph, key) for key in sorted({row.policy_id for row in pending})}
    gate = asyncio.Semaphore(services.settings.rollout_concurrency)

    async def draft(row: Draft) -> tuple[str, Written]:
        async with gate:
            return await write_for(writers[row.policy_id], graph, row.prospect,
                                   rollout_seed(batch.seed, 0, row.prospect["id"], row.position))

    drafted = await asyncio.gather(*(draft(row) for row in pending))
    domain = services.settings.message_id_domain
    async with services.db.transaction() as session:
        stored = 0
        for row, (like, written) in zip(pending, drafted, strict=True):
            email, traced = written.email.email if written.email else None, None
            if email is not None:
                ref = refs.email_ref(batch_id, 0, row.position)
                traced = DraftEmail(**email.model_dump(), ref=ref, message_id=refs.message_id(ref, domain)).model_dump()
                prospect = row.prospect
                session.add(outcomes.email_ref(
                    ref, email, name=prospect["name"], company=prospect["company"], role=prospect["role"],
                    industry=prospect["industry"], tenant=batch.tenant, policy_id=row.policy_id, run_id=row.run_id,
                    iteration=row.iteration, slot=row.position, graph_id=batch.graph_id, scenario_id=like,
                    judge_score=written.score, draft_batch_id=batch_id, prospect_id=prospect["id"]))
            stored += await repository.store_drafted(session, batch_id, row.position, like=like, email=traced,
                                                     judge_score=written.score, drafted_at=utcnow())
        for position, hold in suppressed.items():
            stored += await repository.store_drafted(session, batch_id, position, suppressed=hold, drafted_at=utcnow())
        await repository.count_completed(session, batch_id, stored)
    return stored


@DBOS.step(name="draft_finish")
async def finish_step(batch_id: str, error: str | None) -> None:
    """Marks the batch succeeded or failed, with its outcome event (and its webhook's delivery) in the same transaction;
    once, however often the step runs."""
    async with current().services.db.transaction() as session:
        batch = await session.get(DraftBatch, batch_id, with_for_update=True)
        if batch is None or batch.status in (BatchStatus.SUCCEEDED, BatchStatus.FAILED):
            return
        batch.status = BatchStatus.FAILED if error else BatchStatus.SUCCEEDED
        batch.error = {"message": error, "step": "draft"} if error else None
        batch.finished_at = utcnow()
        subject = service.subject(batch)
        payload = DraftBatchFailedData if error else DraftBatchSucceededData
        await events.emit(session, subject, payload(
            batch_id=batch.id, seq=await events.last_seq(session, subject) + 1, count=batch.count,
            completed=batch.completed, policy=f"{batch.run_id}@{batch.iteration}", error=batch.error,
        ), Receiver(batch.webhook_url, batch.webhook_secret) if batch.webhook_url else None)
    current().wake_relay()


@DBOS.workflow(name=tasks.DRAFT_CHUNK.name)
async def draft_chunk(batch_id: str, start: int, end: int) -> int:
    """Prospects `start` to `end` of a batch, on whichever worker dequeues them; returns how many it drafted."""
    return await draft_chunk_step(batch_id, start, end)


async def _chunks(batch_id: str, count: int) -> list[WorkflowHandleAsync[int]]:
    """The batch's chunks, enqueued; a replay gets the same workflows back (their ids follow from the batch's)."""
    queue = await DBOS.retrieve_queue_async(tasks.DRAFT_CHUNKS.name)
    if queue is None:
        raise RuntimeError(f"DBOS has no queue {tasks.DRAFT_CHUNKS.name!r} (a worker registers it when it starts)")
    return [await queue.enqueue_async(draft_chunk, batch_id, start, min(count, start + CHUNK))
            for start in range(0, count, CHUNK)]


def _failure(batch_id: str, exc: Exception) -> str:
    log.error("draft batch %s failed", batch_id, exc_info=exc)
    return str(exc) if isinstance(exc, DraftingFailed) else describe(exc)


@DBOS.workflow(name=tasks.DRAFT_BATCH.name)
async def draft_batch(batch_id: str) -> str:
    count = await start_step(batch_id)
    error = None
    try:
        chunks = await _chunks(batch_id, count)
    except Exception as exc:  # noqa: BLE001 - the batch fails, saying why; the log has the whole cause
        error, chunks = _failure(batch_id, exc), []
    # Every chunk, in order (each wait is recorded, and a replay must ask in the same order), even after one failed:
    # the batch ends once no chunk of it is drafting any more.
    for chunk in chunks:
        try:
            await chunk.get_result(polling_interval_sec=CHUNK_POLL_S)
        except Exception as exc:  # noqa: BLE001 - the first failure is the batch's
            error = error or _failure(batch_id, exc)
    await finish_step(batch_id, error)
    return BatchStatus.FAILED.value if error else BatchStatus.SUCCEEDED.value
