"""A draft batch's durable workflows: the prospects in chunks, each chunk a workflow of its own on the chunks queue
(any worker drafts it), whose one step drafts the chunk's prospects not yet drafted and stores them in one transaction.
The batch's workflow enqueues its chunks, waits for every one, then ends the batch and notifies its webhook, once.
Killed mid-batch, each workflow resumes where it stopped (a chunk at its step, the batch at the chunk it waits for) and
every prospect ends up drafted exactly once. Only workers import this module (it imports the loop)."""

import asyncio
import json
import logging

import httpx
from dbos import DBOS, WorkflowHandleAsync
from sqlalchemy import select, update

from app.kit.db import describe, utcnow
from app.drafts.models import Draft, DraftBatch
from app import tasks
from app.drafts.schemas import BatchStatus, DraftEmail
from app.events.relay import send_signed
from app.events.service import new_id
from app.loop.email import Written
from app.loop.features import content_hash, email_features, segment
from app.loop.reward import rollout_seed
from app.outcomes import refs
from app.outcomes.models import EmailRef
from app.engine.executor import current
from app.drafts.writing import DraftingFailed, write_for, writer

CHUNK = 25  # prospects per chunk: what a crash can make a worker draft again
CHUNK_POLL_S = 0.2  # how often a batch looks whether the chunk it waits for has ended (as often as the queue is polled)
NOTIFY_ATTEMPTS = 8  # a receiver's failures are retried with backoff for about four minutes
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
        pending = (await session.scalars(select(Draft).where(
            Draft.batch_id == batch_id, Draft.position >= start, Draft.position < end, Draft.drafted_at.is_(None))
            .order_by(Draft.position))).all()
    if not pending:
        return 0
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
                session.add(EmailRef(
                    ref=ref, tenant=batch.tenant, policy_id=row.policy_id, run_id=row.run_id, iteration=row.iteration,
                    slot=row.position,
                    graph_id=batch.graph_id, scenario_id=like, judge_score=written.score,
                    features=email_features(email, row.prospect["name"], row.prospect["company"],
                                            segment(row.prospect["role"], row.prospect["industry"])),
                    content_hash=content_hash(email), draft_batch_id=batch_id, prospect_id=row.prospect["id"]))
            done = await session.execute(update(Draft).where(
                Draft.batch_id == batch_id, Draft.position == row.position, Draft.drafted_at.is_(None)).values(
                like=like, email=traced, judge_score=written.score, drafted_at=utcnow()))
            stored += done.rowcount
        await session.execute(update(DraftBatch).where(DraftBatch.id == batch_id).values(
            completed=DraftBatch.completed + stored))
    return stored


@DBOS.step(name="draft_finish")
async def finish_step(batch_id: str, error: str | None) -> str | None:
    """Marks the batch succeeded or failed; returns its outcome event's type, or None when nobody is to hear it."""
    async with current().services.db.transaction() as session:
        batch = await session.get(DraftBatch, batch_id)
        if batch is None:
            return None
        batch.status = BatchStatus.FAILED if error else BatchStatus.SUCCEEDED
        batch.error = {"message": error, "step": "draft"} if error else None
        batch.finished_at = utcnow()
        return f"draft_batch.{batch.status.value}" if batch.webhook_url else None


@DBOS.step(name="draft_notify", retries_allowed=True, max_attempts=NOTIFY_ATTEMPTS, interval_seconds=2.0, backoff_rate=2.0)
async def notify_step(batch_id: str, event_type: str, event_id: str) -> int:
    """The batch's outcome, POSTed to its webhook_url signed as run webhooks are; retried on any non-2xx answer, a
    timeout or a connection error, with the same event id."""
    services = current().services
    async with services.db.read() as session:
        batch = await session.get(DraftBatch, batch_id)
    if batch is None or batch.webhook_url is None:
        return 0
    data = {"batch_id": batch.id, "status": batch.status.value, "count": batch.count, "completed": batch.completed,
            "policy": f"{batch.run_id}@{batch.iteration}", "error": batch.error}
    body = _event_body(event_type, batch.finished_at.isoformat(), data)
    settings = services.settings
    async with httpx.AsyncClient(follow_redirects=False, timeout=settings.webhook_timeout_s, trust_env=False) as client:
        status = await send_signed(client, services.secrets.open_url(batch.webhook_url), event_id, body,
                                   services.secrets.open(batch.webhook_secret), allow_private=settings.webhook_allow_private)
    if not 200 <= status < 300:
        raise RuntimeError(f"receiver answered {status}")
    return status


def _event_body(event_type: str, timestamp: str, data: dict) -> str:
    return json.dumps({"type": event_type, "timestamp": timestamp, "data": data}, separators=(",", ":"))


@DBOS.step(name="draft_event_id")
async def event_id_step() -> str:
    """Recorded, so every retry and every replay sends the same `webhook-id`."""
    return new_id("evt")


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
    event_type = await finish_step(batch_id, error)
    if event_type is not None:
        try:
            await notify_step(batch_id, event_type, await event_id_step())
        except Exception as exc:  # noqa: BLE001 - the drafts stand; the receiver missed the news
            log.warning("draft batch %s: its webhook was not delivered: %s", batch_id, exc)
    return BatchStatus.FAILED.value if error else BatchStatus.SUCCEEDED.value
