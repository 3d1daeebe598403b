"""A draft batch's durable workflow as the API reaches it: enqueued and cancelled by name (only workers import
`app.drafts.workflow`).

A batch's workflow enqueues each chunk of its prospects as a workflow of its own (`tasks.DRAFT_CHUNK`), so every
worker drafts a share of one batch; the batch's own workflow only waits for its chunks and ends the batch. Both queues
are partitioned by tenant."""

from app import tasks
from app.kit import durable


def workflow_id(batch_id: str, attempt: int) -> str:
    """The batch id, and the attempt for a resumed batch."""
    return batch_id if attempt == 1 else f"{batch_id}.{attempt}"


async def enqueue(batch_id: str, tenant: str, attempt: int = 1) -> None:
    """Idempotent: the workflow id is the batch id (and the attempt)."""
    await durable.enqueue(tasks.DRAFT_BATCH, workflow_id(batch_id, attempt), batch_id, tenant=tenant)


async def cancel(batch_id: str, attempt: int) -> None:
    """The batch's workflow and its chunks' stop at their next step."""
    await durable.cancel(workflow_id(batch_id, attempt))
