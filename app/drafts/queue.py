"""A draft batch's durable workflow as the API reaches it: enqueued by name (only workers import `app.drafts.workflow`).

A batch's workflow enqueues each chunk of its prospects as a workflow of its own on CHUNKS_QUEUE, so every worker drafts
a share of one batch, WORKER_CONCURRENCY chunks at once each; the batch's own workflow, on DRAFTS_QUEUE, only waits
for its chunks and ends the batch. Two queues, so batches waiting for their chunks can never hold every slot the chunks
need."""

from app.runs import queue as runs_queue

DRAFTS_QUEUE = "drafts"
CHUNKS_QUEUE = "draft_chunks"
WORKFLOW_NAME = "draft_batch"
CHUNK_WORKFLOW_NAME = "draft_batch_chunk"


async def enqueue(batch_id: str) -> None:
    """Idempotent: the workflow id is the batch id."""
    await runs_queue.enqueue_workflow(DRAFTS_QUEUE, WORKFLOW_NAME, batch_id, batch_id)
