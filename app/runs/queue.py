"""A run's durable workflow as the API reaches it: enqueued and cancelled by name, through DBOS's client.

The API never imports the workflow itself (the loop, ART and litellm: 2 s of CPU at start-up and 100 MB in every API
process); only workers register and execute it (`app.runs.workflow`). Both enqueue the same way, here.
"""

from dbos import DBOS, DBOSClient, EnqueueOptions

RUNS_QUEUE = "runs"
WORKFLOW_NAME = "learning_run"
# DBOS recovers and dequeues only the workflows of its own application version. Pinned, rather than DBOS's
# hash of the workflow's source, so a run in flight across an upgrade resumes on the new code; bump it
# only when the steps' order or names change, as a checkpoint of the old order cannot be replayed.
WORKFLOW_VERSION = "learning_run-2"
APPLICATION = "codreamer"

_client: DBOSClient | None = None


def connect(system_database_url: str) -> None:
    """Once DBOS's tables are there: a worker's DBOS launch, or an API's `DBOS.migrate`, makes them."""
    global _client
    _client = DBOSClient(system_database_url=system_database_url, application_name=APPLICATION,
                         system_database_pool_size=2, lazy=True)


def disconnect() -> None:
    global _client
    client, _client = _client, None
    if client is not None:
        client.destroy()


def workflow_id(run_id: str, attempt: int) -> str:
    return run_id if attempt == 1 else f"{run_id}.{attempt}"


def _connected() -> DBOSClient:
    if _client is None:
        raise RuntimeError("the run queue is not connected (the process has not started)")
    return _client


async def enqueue_workflow(queue_name: str, workflow_name: str, workflow_id: str, *args) -> None:
    """Any durable workflow a worker registers (a run's, a draft batch's); idempotent by its id."""
    options: EnqueueOptions = {"queue_name": queue_name, "workflow_name": workflow_name, "app_version": WORKFLOW_VERSION,
                               "workflow_id": workflow_id}
    await _connected().enqueue_async(options, *args)


async def enqueue(run_id: str, attempt: int = 1) -> None:
    """Idempotent: the workflow id is the run id (and the attempt, for a resumed run)."""
    await enqueue_workflow(RUNS_QUEUE, WORKFLOW_NAME, workflow_id(run_id, attempt), run_id)


async def cancel(run_id: str, attempt: int) -> None:
    await _connected().cancel_workflow_async(workflow_id(run_id, attempt))


def running_here() -> list[str]:
    """The workflow ids this process is executing now."""
    from dbos import _dbos

    instance = _dbos._dbos_global_instance
    return instance._active_workflows_set.activeList() if instance is not None else []


async def result(run_id: str, attempt: int = 1) -> str:
    """The workflow's result, once DBOS has recorded it (a run's last event precedes that by a moment)."""
    handle = await DBOS.retrieve_workflow_async(workflow_id(run_id, attempt))
    return await handle.get_result()

