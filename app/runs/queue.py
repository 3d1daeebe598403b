"""A run's durable workflow as the API reaches it: enqueued and cancelled through DBOS's client."""

from dbos import DBOS

from app import tasks
from app.kit import durable


def workflow_id(run_id: str, attempt: int) -> str:
    return run_id if attempt == 1 else f"{run_id}.{attempt}"


async def enqueue(run_id: str, attempt: int = 1) -> None:
    """Idempotent: the workflow id is the run id (and the attempt, for a resumed run)."""
    await durable.enqueue(tasks.LEARNING_RUN, workflow_id(run_id, attempt), run_id)


async def cancel(run_id: str, attempt: int) -> None:
    await durable.client().cancel_workflow_async(workflow_id(run_id, attempt))


async def result(run_id: str, attempt: int = 1) -> str:
    """The workflow's result, once DBOS has recorded it (a run's last event precedes that by a moment)."""
    handle = await DBOS.retrieve_workflow_async(workflow_id(run_id, attempt))
    return await handle.get_result()
