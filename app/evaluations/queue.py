"""An evaluation's durable workflow as the API reaches it (only workers import `app.evaluations.workflow`), on the
drafts queue, partitioned by tenant."""

from app import tasks
from app.kit import durable


async def enqueue(evaluation_id: str, tenant: str) -> None:
    await durable.enqueue(tasks.EVALUATION, evaluation_id, evaluation_id, tenant=tenant)


async def cancel(evaluation_id: str) -> None:
    await durable.cancel(evaluation_id)
