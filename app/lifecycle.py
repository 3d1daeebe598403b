"""Start-up and shut-down shared by `codreamer serve` and `codreamer worker`."""

import asyncio
import functools
import logging
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dbos import DBOS

from app import logs, migrations
from app.auth import parse_api_keys
from app.backends.specs import BackendUnavailable, check_available
from app.core import Services
from app.db import Database
from app.events.relay import WebhookRelay
from app.events.signing import SecretBox
from app.events.stream import EventFeed
from app.heap import freeze_startup_heap
from app.knowledge_graph import repository as graphs_repository
from app.knowledge_graph.service import GraphCache, demo_document
from app.drafts import queue as drafts_queue
from app.drafts import service as drafts_service
from app.observability import init_tracing
from app.policies import repository as policies_repository
from app.policies import warm_start
from app.outcomes import inbound_pool
from app.runs import queue
from app.runs import repository as runs_repository
from app.runs.workers import Housekeeper
from app.settings import Settings

if TYPE_CHECKING:
    from app.runs.executor import Executor

log = logging.getLogger("codreamer")


class StartupError(RuntimeError):
    """A configuration the service refuses to start with; the message says what to change."""


DATABASE_ERRORS = logs.database_errors()


def check(settings: Settings) -> None:
    if settings.environment == "production" and not settings.api_keys:
        raise StartupError("ENVIRONMENT=production requires API_KEYS (comma-separated bearer keys); refusing to start")
    if settings.environment == "production" and not settings.secret_key:
        raise StartupError("ENVIRONMENT=production requires SECRET_KEY (it encrypts webhook secrets at rest); refusing to start")
    if not settings.is_sqlite and not settings.secret_key:  # a key file would differ between processes and hosts
        raise StartupError("a PostgreSQL DATABASE_URL requires SECRET_KEY, the same in every process that shares the "
                           "database (it seals webhook secrets for the workers that sign them); refusing to start")
    try:
        parse_api_keys(settings.api_keys)
    except ValueError as exc:
        raise StartupError(str(exc)) from None
    try:
        check_available(settings.model_backend, settings)
    except BackendUnavailable as exc:
        raise StartupError(f"MODEL_BACKEND={settings.model_backend}: {exc}") from None


def secret_key(settings: Settings) -> str:
    """SECRET_KEY, or in development a random key kept in a file beside the data (made once)."""
    if settings.secret_key:
        return settings.secret_key
    folder = settings.sqlite_path.parent  # only on SQLite, whose one file has one `serve` process (see `check`)
    path = folder / "secret.key"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
        log.warning("SECRET_KEY is not set: webhook secrets are encrypted with a key kept in %s (development only)", path)
    return path.read_text().strip()


def dbos_database_url(settings: Settings) -> str:
    """DBOS keeps its own tables: a sibling SQLite file, or the `dbos` schema of the same PostgreSQL database."""
    if settings.is_sqlite:
        path = settings.sqlite_path
        return f"sqlite:///{path.with_name(path.stem + '-dbos' + path.suffix)}"
    return settings.database_url.replace("postgres://", "postgresql://", 1)


@dataclass
class Process:
    """What `start` brought up: the API's services and, in a worker, the run executor and webhook relay."""

    api: Services
    executor: "Executor | None" = None
    relay: WebhookRelay | None = None
    housekeeper: Housekeeper | None = None
    background: list[asyncio.Task] = field(default_factory=list)  # the relay and the housekeeping


async def start(settings: Settings, *, worker: bool, api: bool = True) -> Process:
    """Migrates, loads the demo graph, and launches DBOS; a worker also executes runs and delivers webhooks."""
    check(settings)
    if api and not settings.api_keys:
        log.warning("API_KEYS is empty: the API accepts unauthenticated requests (development only)")
    init_tracing(settings.wandb_api_key, settings.weave_project)
    db = None
    try:
        await asyncio.to_thread(migrations.upgrade, settings.database_url)
        db = Database(settings)
        async with db.transaction() as session:
            if not await graphs_repository.exists(session, demo_document().id):
                await graphs_repository.save(session, demo_document())
    except DATABASE_ERRORS as exc:
        log.debug("database check failed", exc_info=True)
        if db is not None:
            await db.close()
        raise StartupError(logs.database_problem(settings.database_url, exc)) from None
    process = Process(api=Services(settings=settings, db=db, graphs=GraphCache(db), secrets=SecretBox(secret_key(settings)),
                                   runs_on_graph=runs_repository.runs_on_graph,
                                   deployed_on=policies_repository.deployed_graph, sent_drafts=drafts_service.sent_drafts,
                                   warm_start=warm_start.start_from, feed=EventFeed(db),
                                   wake_waiting=functools.partial(queue.wake_waiting, db)))
    process.api.health.append(db.problem)
    if worker:
        # Only a worker imports the loop (ART, litellm), and the workflow, which registers with DBOS before it launches.
        from app.drafts import workflow as drafts_workflow  # noqa: F401
        from app.evaluations import workflow as evaluations_workflow  # noqa: F401
        from app.runs import executor, workflow  # noqa: F401

        process.relay = WebhookRelay(db, settings, process.api.secrets)
        process.executor = executor.Executor(process.api, wake_relay=process.relay.wake)
        process.api.health.append(process.executor.embedded.problem)
        executor.install(process.executor)
    try:
        await _launch(settings, process, worker=worker)
    except BaseException as exc:  # nothing DBOS started may keep the process alive
        queue.disconnect()
        DBOS.destroy(destroy_registry=False)
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(thread_name_prefix="codreamer"))
        await _close_executor(process)
        await db.close()
        if isinstance(exc, DATABASE_ERRORS):
            raise StartupError(logs.database_problem(settings.database_url, exc)) from None
        raise
    freeze_startup_heap()
    return process


async def _launch(settings: Settings, process: Process, *, worker: bool) -> None:
    """A worker launches DBOS, which executes and recovers workflows. An API only enqueues, cancels and wakes them,
    through DBOS's client: launched, DBOS would keep threads busy that an API never uses (a notifier waking 100 times
    a second, queue polling, a scheduler), each one taking the interpreter from the requests in turn."""
    system_database = dbos_database_url(settings)
    if not worker:
        await asyncio.to_thread(DBOS.migrate, system_database)  # the client writes to DBOS's tables
        queue.connect(system_database)
        return
    DBOS(config={
        "name": queue.APPLICATION,
        "system_database_url": system_database,
        "executor_id": settings.executor_id,
        "application_version": queue.WORKFLOW_VERSION,
        "log_level": "WARNING",
    })
    DBOS.launch()
    queue.connect(system_database)
    await DBOS.register_queue_async(
        queue.RUNS_QUEUE, global_concurrency=settings.max_concurrent_runs,
        worker_concurrency=min(settings.worker_concurrency, settings.max_concurrent_runs), polling_interval_sec=0.2,
    )
    for name in (drafts_queue.DRAFTS_QUEUE, drafts_queue.CHUNKS_QUEUE):
        await DBOS.register_queue_async(
            name, global_concurrency=settings.max_concurrent_runs,
            worker_concurrency=min(settings.worker_concurrency, settings.max_concurrent_runs), polling_interval_sec=0.2,
        )
    process.housekeeper = housekeeper = Housekeeper(process.api.db, settings)
    await housekeeper.reconcile()  # before new work: runs left queued or hanging by a crash
    process.background = [asyncio.create_task(process.relay.run_forever()), asyncio.create_task(housekeeper.run_forever())]


# How long the relay's poll or the housekeeping round in progress gets to finish at shutdown.
BACKGROUND_STOP_S = 10.0


async def stop(process: Process) -> None:
    await stop_background(process)
    if process.relay is not None:
        await process.relay.close()
    interrupted = await drain(process.api.settings)
    # From here on nothing a workflow does is recorded: one still running stays PENDING, for recovery.
    queue.disconnect()
    DBOS.destroy(destroy_registry=False)
    # DBOS made its thread pool the loop's default executor and has just shut that pool down.
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(thread_name_prefix="codreamer"))
    if interrupted:
        await interrupt(interrupted, process.api.settings)
    await _close_executor(process)
    await inbound_pool.shutdown()  # the inbound parser's processes, if a reply started them
    await process.api.feed.close()
    await process.api.db.close()


async def _close_executor(process: Process) -> None:
    if process.executor is not None:
        from app.runs import executor

        await process.executor.close()
        executor.install(None)


async def stop_background(process: Process) -> None:
    """Stops the relay and the housekeeping between two rounds, so that no session of theirs is open when the engine
    is disposed.

    They are asked to stop, not cancelled: a cancellation can land while a session hands its connection back to the
    pool (the rollback that resets it), which SQLAlchemy then logs as a traceback and abandons the connection, its
    driver thread still working for an event loop that is about to close. Only a round stuck longer than
    BACKGROUND_STOP_S (a database that does not answer) is cancelled.
    """
    for loop in (process.relay, process.housekeeper):
        if loop is not None:
            loop.stop()
    if not process.background:
        return
    _, stuck = await asyncio.wait(process.background, timeout=BACKGROUND_STOP_S)
    for task in stuck:
        task.cancel()
    await asyncio.gather(*process.background, return_exceptions=True)


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
        _, stuck = await asyncio.wait(tasks, timeout=BACKGROUND_STOP_S)
    if stuck:  # asyncio.run cancels them again on its way out; say so rather than let that look routine
        log.warning("%d interrupted run(s) still unwinding after %g s", len(stuck), BACKGROUND_STOP_S)
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
