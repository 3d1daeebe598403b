"""A run's durable workflow as the API reaches it: enqueued, cancelled and woken through DBOS's client."""

from dbos import DBOS
from sqlalchemy import select

from app import tasks
from app.kit import durable
from app.kit.db import Database
from app.runs.models import Run
from app.runs.status import RunStatus

OUTCOMES_TOPIC = "outcomes"  # what a waiting run receives when outcomes arrive


def workflow_id(run_id: str, attempt: int) -> str:
    return run_id if attempt == 1 else f"{run_id}.{attempt}"


async def enqueue(run_id: str, attempt: int = 1) -> None:
    """Idempotent: the workflow id is the run id (and the attempt, for a resumed run)."""
    await durable.enqueue(tasks.LEARNING_RUN, workflow_id(run_id, attempt), run_id)


async def cancel(run_id: str, attempt: int) -> None:
    await durable.client().cancel_workflow_async(workflow_id(run_id, attempt))


async def wake_waiting(db: Database, run_ids: set[str]) -> None:
    """Tells the runs among `run_ids` that wait for outcomes that some arrived: it ends their sleep early."""
    async with db.read() as session:
        rows = (await session.execute(select(Run.id, Run.attempt, Run.waiting).where(
            Run.id.in_(run_ids), Run.status == RunStatus.RUNNING))).all()
    for run_id, attempt, waiting in rows:
        if waiting:
            await durable.client().send_async(workflow_id(run_id, attempt), "arrived", topic=OUTCOMES_TOPIC)


async def result(run_id: str, attempt: int = 1) -> str:
    """The workflow's result, once DBOS has recorded it (a run's last event precedes that by a moment)."""
    handle = await DBOS.retrieve_workflow_async(workflow_id(run_id, attempt))
    return await handle.get_result()
