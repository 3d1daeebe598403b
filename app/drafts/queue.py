"""A draft batch's durable workflow as the API reaches it: enqueued by name (only workers import `app.drafts.workflow`).

A batch's workflow enqueues each chunk of its prospects as a workflow of its own (`tasks.DRAFT_CHUNK`), so every
worker drafts a share of one batch; the batch's own workflow only waits for its chunks and ends the batch."""

from app import tasks
from app.kit import durable


async def enqueue(batch_id: str) -> None:
    """Idempotent: the workflow id is the batch id."""
    await durable.enqueue(tasks.DRAFT_BATCH, batch_id, batch_id)
