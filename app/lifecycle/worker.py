"""A worker's process: the API's services, and what executes durable workflows (every workflow `app.tasks` lists,
the executor with its backends and judges), delivers webhooks and keeps house. `codreamer worker` starts one, and so
does an API process that runs its worker in itself (RUN_WORKER without a child process)."""

import asyncio
import importlib
import logging
from dataclasses import dataclass, field

from dbos import DBOS

from app import tasks
from app.drafts import service as drafts
from app.engine.executor import Executor, install
from app.evaluations import service as evaluations
from app.events.relay import WebhookRelay
from app.kit import durable, logs
from app.kit.heap import freeze_startup_heap
from app.kit.settings import Settings
from app.lifecycle import api as lifecycle
from app.runs.workers import Housekeeper

log = logging.getLogger("codreamer")

@dataclass
class Worker(lifecycle.Process):
    executor: Executor | None = None
    relay: WebhookRelay | None = None
    housekeeper: Housekeeper | None = None
    background: list[asyncio.Task] = field(default_factory=list)  # the relay and the housekeeping


async def start(settings: Settings, *, api: bool = True) -> Worker:
    """The API's services, then every workflow registered (before DBOS launches), DBOS launched with its queues, the
    webhook relay and the housekeeping running."""
    services = await lifecycle.open_services(settings, api=api)
    for module in {workflow.module for workflow in tasks.WORKFLOWS}:
        importlib.import_module(module)
    worker = Worker(api=services)
    worker.relay = WebhookRelay(services.db, settings, services.secrets)
    worker.executor = Executor(services, wake_relay=worker.relay.wake)
    services.health.append(worker.executor.embedded.problem)
    install(worker.executor)
    try:
        await _launch(settings, worker)
    except BaseException as exc:  # nothing DBOS started may keep the process alive
        durable.disconnect()
        DBOS.destroy(destroy_registry=False)
        lifecycle.restore_default_executor()
        await _close_executor(worker)
        await services.db.close()
        if isinstance(exc, lifecycle.DATABASE_ERRORS):
            raise lifecycle.StartupError(logs.database_problem(settings.database_url, exc)) from None
        raise
    freeze_startup_heap()
    return worker


async def _launch(settings: Settings, worker: Worker) -> None:
    system_database = lifecycle.dbos_database_url(settings)
    DBOS(config={
        "name": durable.APPLICATION,
        "system_database_url": system_database,
        "executor_id": settings.executor_id,
        "application_version": tasks.APPLICATION_VERSION,
        "log_level": "WARNING",
    })
    DBOS.launch()
    durable.connect(system_database, tasks.APPLICATION_VERSION)
    for queue in tasks.QUEUES:
        per_tenant = (min(settings.draft_concurrency_per_tenant, settings.max_concurrent_runs) if queue.by_tenant
                      else None)
        await DBOS.register_queue_async(
            queue.name, global_concurrency=settings.max_concurrent_runs, partition_concurrency=per_tenant,
            worker_concurrency=min(settings.worker_concurrency, settings.max_concurrent_runs), polling_interval_sec=0.2,
        )
    worker.housekeeper = housekeeper = Housekeeper(worker.api.db, settings, rounds=(
        lambda: drafts.end_orphans(worker.api), lambda: evaluations.end_orphans(worker.api)))
    await housekeeper.reconcile()  # before new work: runs left queued or hanging by a crash
    worker.background = [asyncio.create_task(worker.relay.run_forever()), asyncio.create_task(housekeeper.run_forever())]


async def stop(worker: Worker) -> None:
    await stop_background(worker)
    if worker.relay is not None:
        await worker.relay.close()
    interrupted = await drain(worker.api.settings)
    # From here on nothing a workflow does is recorded: one still running stays PENDING, for recovery.
    durable.disconnect()
    DBOS.destroy(destroy_registry=False)
    lifecycle.restore_default_executor()
    if interrupted:
        await interrupt(interrupted, worker.api.settings)
    await _close_executor(worker)
    await lifecycle.close_services(worker.api)


async def _close_executor(worker: Worker) -> None:
    if worker.executor is not None:
        await worker.executor.close()
        install(None)


async def stop_background(worker: Worker) -> None:
    """Stops the relay and the housekeeping between two rounds, so that no session of theirs is open when the engine
    is disposed.

    They are asked to stop, not cancelled: a cancellation can land while a session hands its connection back to the
    pool (the rollback that resets it), which SQLAlchemy then logs as a traceback and abandons the connection, its
    driver thread still working for an event loop that is about to close. Only a round stuck longer than
    lifecycle.BACKGROUND_STOP_S (a database that does not answer) is cancelled.
    """
    for loop in (worker.relay, worker.housekeeper):
        if loop is not None:
            loop.stop()
    if not worker.background:
        return
    _, stuck = await asyncio.wait(worker.background, timeout=lifecycle.BACKGROUND_STOP_S)
    for task in stuck:
        task.cancel()
    await asyncio.gather(*worker.background, return_exceptions=True)


async def drain(settings: Settings) -> set[asyncio.Task]:
    """Stops taking new runs and lets the runs in flight finish for up to SHUTDOWN_DRAIN_S; returns those still running.

    Workflows run as tasks on this event loop, so the wait happens here (DBOS's own
    `workflow_completion_timeout_sec` would block the loop they need).
    """
    from dbos import _dbos

    instance = _dbos._dbos_global_instance
    if instance is None:
        return set()
    for event in list(getattr(instance, "background_thread_stop_events", [])):
        event.set()  # the queue hands out no more work
    tasks = {task for task in getattr(instance, "_workflow_tasks", ()) if not task.done()}
    if not tasks:
        return set()
    seconds = settings.shutdown_drain_s
    log.info("shutting down: waiting up to %g s for %d run(s) in flight", seconds, len(tasks))
    if seconds <= 0:
        return tasks
    _, pending = await asyncio.wait(tasks, timeout=seconds)
    return pending


async def interrupt(tasks: set[asyncio.Task], settings: Settings) -> None:
    """Cancels workflows still running once DBOS is down, so they record nothing, not even a failure.

    DBOS keeps them PENDING for this EXECUTOR_ID: they resume from their last completed step
    when a worker with that id starts (steps are idempotent), and are never marked failed.
    """
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_ignore_orphans(loop.get_exception_handler()))
    with logs.quiet_interruptions():
        for task in tasks:
            task.cancel()
        _, stuck = await asyncio.wait(tasks, timeout=lifecycle.BACKGROUND_STOP_S)
    if stuck:  # asyncio.run cancels them again on its way out; say so rather than let that look routine
        log.warning("%d interrupted run(s) still unwinding after %g s", len(stuck), lifecycle.BACKGROUND_STOP_S)
    log.warning("%d run(s) interrupted by shutdown; they resume when a worker with EXECUTOR_ID=%s starts",
                len(tasks), settings.executor_id)


def _ignore_orphans(previous):
    """An exception handler that drops the errors of an interrupted run's leftover tasks (a rollout whose model was
    just closed); anything else goes to the previous handler."""

    def handler(loop: asyncio.AbstractEventLoop, context: dict) -> None:
        if context.get("message") == "Task exception was never retrieved":
            log.debug("after an interrupted run: %s", context.get("exception"))
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    return handler
