"""An evaluation's durable workflow as the API reaches it (only workers import `app.evaluations.workflow`)."""

from app.runs import queue as runs_queue

WORKFLOW_NAME = "evaluation"
QUEUE = "drafts"  # evaluations draft, as batches do, and share their queue


async def enqueue(evaluation_id: str) -> None:
    await runs_queue.enqueue_workflow(QUEUE, WORKFLOW_NAME, evaluation_id, evaluation_id)
