"""A draft batch's durable workflows: the prospects in chunks, each chunk a workflow of its own on the chunks queue
(any worker drafts it), whose one step drafts the chunk's prospects not yet drafted and stores them in one transaction.
The batch's workflow enqueues its chunks, waits for every one, then ends the batch and writes its outcome event, once
(its webhook, if any, goes out through the outbox relay: a receiver never holds the batch's queue slot).
Killed mid-batch, each workflow resumes where it stopped (a chunk at its step, the batch at the chunk it waits for) and
every prospect ends up drafted exactly once; each step is re-run through a passing database error (a restart, a lost
connection). Both queues are partitioned by the batch's tenant. Only workers import this module (it imports the
loop)."""

import asyncio
import logging
from typing import NamedTuple

from dbos import DBOS, SetEnqueueOptions, WorkflowHandleAsync

from app import tasks
from app.drafts import repository, service
from app.drafts.models import Draft, DraftBatch
from app.drafts.schemas import ENDED, BatchStatus, DraftEmail, Fit
from app.drafts.writing import Drafted, DraftingFailed, write_for, writer
from app.engine.executor import current
from app.kit import durable
from app.kit.db import describe, utcnow
from app.knowledge_graph.schemas import Sender
from app.loop.reward import rollout_seed
from app.outcomes import refs
from app.outcomes import repository as outcomes
from app.outcomes.service import suppressions_of
from app.outcomes.verification import domain_of

CHUNK = 25  # prospects per chunk: what a crash can make a worker draft again
CHUNK_POLL_S = 0.2  # how often a batch looks whether the chunk it waits for has ended (as often as the queue is polled)
log = logging.getLogger("codreamer")


class BatchStart(NamedTuple):
    count: int  # prospects to draft (0: the batch is gone or cancelled)
    tenant: str  # whose queue partition its chunks go to


@DBOS.step(name="draft_start", **durable.THROUGH_DATABASE_TROUBLE)
async def start_step(batch_id: str) -> BatchStart:
    async with current().services.db.transaction() as session:
        batch = await session.get(DraftBatch, batch_id, with_for_update=True)
        if batch is None or batch.status == BatchStatus.CANCELLED:
            return BatchStart(0, batch.tenant if batch else "")
        if batch.status == BatchStatus.QUEUED:
            batch.status = BatchStatus.RUNNING
        return BatchStart(batch.count, batch.tenant)


@DBOS.step(name="draft_chunk", **durable.THROUGH_DATABASE_TROUBLE)
async def draft_chunk_step(batch_id: str, start: int, end: int) -> int:
    """Drafts the chunk's prospects not drafted yet, each with the policy drawn for it; returns how many it drafted.
    Re-run whole after a passing database error: what an attempt stored is not drafted again."""
    executor = current()
    services = executor.services
    async with services.db.read() as session:
        batch = await session.get(DraftBatch, batch_id)
        if batch is None or batch.status == BatchStatus.CANCELLED:
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
    graph = (await services.graphs.get(batch.graph_id)).signed_by(
        Sender.model_validate(batch.sender) if batch.sender else None)
    writers = {key: await writer(executor, graph, key) for key in sorted({row.policy_id for row in pending})}
    gate = asyncio.Semaphore(services.settings.rollout_concurrency)

    async def draft(row: Draft) -> Drafted:
        async with gate:
            return await write_for(writers[row.policy_id], graph, row.prospect,
                                   rollout_seed(batch.seed, 0, row.prospect["id"], row.position),
                                   skip_low_fit=batch.skip_low_fit)

    drafted = await asyncio.gather(*(draft(row) for row in pending))
    domain = services.settings.message_id_domain
    async with services.db.transaction() as session:
        # the batch's row first: a cancel (which locks it too) comes before this chunk's drafts or after them
        locked = await session.get(DraftBatch, batch_id, with_for_update=True)
        if locked is None or locked.status in ENDED:
            return 0
        stored = 0
        for row, done in zip(pending, drafted, strict=True):
            like, written = done.like, done.written
            email = written.email.email if written is not None and written.email else None
            traced = None
            if email is not None:
                ref = refs.email_ref(batch_id, 0, row.position)
                traced = DraftEmail(**email.model_dump(), ref=ref, message_id=refs.message_id(ref, domain)).model_dump()
                prospect = row.prospect
                address = prospect.get("email")
                at_domain = address and domain_of(address)
                session.add(outcomes.email_ref(
                    ref, email, name=prospect["name"], company=prospect["company"], role=prospect.get("role") or "",
                    industry=prospect.get("industry") or "", tenant=batch.tenant, policy_id=row.policy_id, run_id=row.run_id,
                    iteration=row.iteration, slot=row.position, graph_id=batch.graph_id, scenario_id=like,
                    judge_score=written.score, draft_batch_id=batch_id, prospect_id=prospect["id"],
                    recipient=address and services.secrets.pseudonym(address),
                    recipient_domain=at_domain and services.secrets.pseudonym(at_domain)))
            skipped = written is None
            reason = done.fit.reason + (" (not drafted: the batch skips low fits)" if skipped else "")
            stored += await repository.store_drafted(
                session, batch_id, row.position, like=like, email=traced, judge_score=None if skipped else written.score,
                fit=Fit.HIGH if done.fit.high else Fit.LOW, fit_reason=reason, drafted_at=utcnow())
        for position, hold in suppressed.items():
            stored += await repository.store_drafted(session, batch_id, position, suppressed=hold, drafted_at=utcnow())
        await repository.count_completed(session, batch_id, stored)
    return stored


@DBOS.step(name="draft_finish", **durable.THROUGH_DATABASE_TROUBLE)
async def finish_step(batch_id: str, error: str | None) -> None:
    """Marks the batch succeeded or failed, with its outcome event (and its webhook's delivery) in the same transaction;
    once, however often the step runs, and never once the batch was cancelled."""
    async with current().services.db.transaction() as session:
        batch = await session.get(DraftBatch, batch_id, with_for_update=True)
        if batch is None or batch.status in ENDED:
            return
        await service.end(session, batch, error)
    current().wake_relay()


@DBOS.workflow(name=tasks.DRAFT_CHUNK.name)
async def draft_chunk(batch_id: str, start: int, end: int) -> int:
    """Prospects `start` to `end` of a batch, on whichever worker dequeues them; returns how many it drafted."""
    return await draft_chunk_step(batch_id, start, end)


async def _chunks(batch_id: str, start: BatchStart) -> list[WorkflowHandleAsync[int]]:
    """The batch's chunks, enqueued in its tenant's partition; a replay gets the same workflows back (their ids follow
    from the batch's)."""
    queue = await DBOS.retrieve_queue_async(tasks.DRAFT_CHUNKS.name)
    if queue is None:
        raise RuntimeError(f"DBOS has no queue {tasks.DRAFT_CHUNKS.name!r} (a worker registers it when it starts)")
    with SetEnqueueOptions(queue_partition_key=start.tenant):
        return [await queue.enqueue_async(draft_chunk, batch_id, first, min(start.count, first + CHUNK))
                for first in range(0, start.count, CHUNK)]


def _failure(batch_id: str, exc: Exception) -> str:
    log.error("draft batch %s failed", batch_id, exc_info=exc)
    return str(exc) if isinstance(exc, DraftingFailed) else describe(exc)


@DBOS.workflow(name=tasks.DRAFT_BATCH.name)
async def draft_batch(batch_id: str) -> str:
    start = await start_step(batch_id)
    error = None
    try:
        chunks = await _chunks(batch_id, start)
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
