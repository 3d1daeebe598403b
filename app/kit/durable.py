"""Durable workflows as the API reaches them: enqueued, cancelled and messaged by name, through DBOS's client.

The API never imports a workflow's module (the loop, ART and litellm: 2 s of CPU at start-up and 100 MB in every API
process); only workers register and execute them. `app.tasks` lists every workflow and queue; this module knows none
of them.
"""

from dataclasses import dataclass
from typing import NamedTuple

from dbos import DBOSClient, EnqueueOptions

from app.kit.db import is_transient

APPLICATION = "codreamer"
THROUGH_DATABASE_TROUBLE = {"retries_allowed": True, "should_retry": is_transient, "interval_seconds": 1.0,
                            "backoff_rate": 2.0, "max_attempts": 8}
"""`DBOS.step` options for an idempotent step: re-run after a passing database error (a lost connection, a restart),
waiting 1, 2, 4 ... 64 s between attempts (over two minutes in all); any other error fails it at once."""


@dataclass(frozen=True)
class Queue:
    """A DBOS queue; `by_tenant`: partitioned by the tenant, each tenant's workflows under a limit of their own."""

    name: str
    by_tenant: bool = False


@dataclass(frozen=True)
class Workflow:
    """A durable workflow: its registered name, the queue it is enqueued on, the module a worker imports to register it,
    and the version of its steps (bumped when their order, names or arguments change)."""

    name: str
    queue: Queue
    module: str
    version: int


_client: DBOSClient | None = None
_version: str | None = None


def connect(system_database_url: str, application_version: str) -> None:
    """Once DBOS's tables are there: a worker's DBOS launch, or an API's `DBOS.migrate`, makes them."""
    global _client, _version
    _client = DBOSClient(system_database_url=system_database_url, application_name=APPLICATION,
                         system_database_pool_size=2, lazy=True)
    _version = application_version


def disconnect() -> None:
    global _client
    client, _client = _client, None
    if client is not None:
        client.destroy()


def client() -> DBOSClient:
    if _client is None:
        raise RuntimeError("the workflow queue is not connected (the process has not started)")
    return _client


async def enqueue(workflow: Workflow, workflow_id: str, *args, tenant: str | None = None) -> None:
    """Idempotent by the workflow id. A queue partitioned by tenant needs the tenant."""
    options: EnqueueOptions = {"queue_name": workflow.queue.name, "workflow_name": workflow.name,
                               "app_version": _version, "workflow_id": workflow_id}
    if workflow.queue.by_tenant:
        if tenant is None:
            raise ValueError(f"queue {workflow.queue.name!r} is partitioned by tenant: enqueue with one")
        options["queue_partition_key"] = tenant
    await client().enqueue_async(options, *args)


async def cancel(workflow_id: str) -> None:
    """Cooperative: the workflow and the workflows it enqueued stop at their next step."""
    await client().cancel_workflow_async(workflow_id, cancel_children=True)


WORKFLOW_ENDED = ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")


class WorkflowState(NamedTuple):
    status: str  # DBOS's: ENQUEUED, PENDING, SUCCESS, ERROR ...
    stale: bool  # of another application version, not ended: no worker of this version will ever run it

    @property
    def abandoned(self) -> bool:
        """Ended without success, or never to run here: what it was for must be ended some other way."""
        return self.status in WORKFLOW_ENDED or self.stale


async def states(workflow_ids: list[str]) -> dict[str, WorkflowState]:
    """Each workflow's state; a workflow that does not exist is absent."""
    if not workflow_ids:
        return {}
    found = await client().list_workflows_async(workflow_ids=workflow_ids, load_input=False, load_output=False)
    return {w.workflow_id: WorkflowState(w.status, w.app_version not in (None, _version)
                                         and w.status not in ("SUCCESS", *WORKFLOW_ENDED)) for w in found}


def running_here() -> list[str]:
    """The workflow ids this process is executing now."""
    from dbos import _dbos

    instance = _dbos._dbos_global_instance
    return instance._active_workflows_set.activeList() if instance is not None else []
