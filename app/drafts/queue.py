"""A draft batch's durable workflow as the API reaches it: enqueued by name (only workers import `app.drafts.workflow`)."""

from app.runs import queue as runs_queue

DRAFTS_QUEUE = "drafts"
WORKFLOW_NAME = "draft_batch"


async def enqueue(batch_id: str) -> None:
    """Idempotent: the workflow id is the batch id."""
    await runs_queue.enqueue_workflow(DRAFTS_QUEUE, WORKFLOW_NAME, batch_id, batch_id)
