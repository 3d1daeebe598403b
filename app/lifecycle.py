"""Start-up and shut-down shared by `codreamer serve` and `codreamer worker`."""

import asyncio
import logging

from dbos import DBOS
from sqlalchemy import select

from app import core, migrations
from app.backends.registry import BackendUnavailable, check_available
from app.db import Database
from app.knowledge_graph import repository as graphs_repository
from app.knowledge_graph.service import demo_document
from app.observability import init_tracing
from app.runs.models import Run
from app.settings import Settings

log = logging.getLogger("codreamer")


class StartupError(RuntimeError):
    """A configuration the service refuses to start with; the message says what to change."""


def check(settings: Settings) -> None:
    if settings.environment == "production" and not settings.api_keys:
        raise StartupError("ENVIRONMENT=production requires API_KEYS (comma-separated bearer keys); refusing to start")
    try:
        check_available(settings.model_backend, settings)
    except BackendUnavailable as exc:
        raise StartupError(f"MODEL_BACKEND={settings.model_backend}: {exc}") from None


def dbos_database_url(settings: Settings) -> str:
    """DBOS keeps its own tables: a sibling SQLite file, or the `dbos` schema of the same PostgreSQL database."""
    if settings.is_sqlite:
        path = settings.sqlite_path
        return f"sqlite:///{path.with_name(path.stem + '-dbos' + path.suffix)}"
    return settings.database_url.replace("postgres://", "postgresql://", 1)


async def start(settings: Settings, *, worker: bool) -> core.Services:
    """Migrates, loads the demo graph, and launches DBOS; a worker also executes runs and delivers webhooks."""
    check(settings)
    if not settings.api_keys:
        log.warning("API_KEYS is empty: the API accepts unauthenticated requests (development only)")
    init_tracing(settings.wandb_api_key, settings.weave_project)
    await asyncio.to_thread(migrations.upgrade, settings.database_url)
    db = Database(settings)
    async with db.transaction() as session:
        if not await graphs_repository.exists(session, demo_document().id):
            await graphs_repository.save(session, demo_document())
    services = core.Services(settings=settings, db=db, graphs=core.GraphCache(db))
    if worker:
        from app.runs.executor import Executor
        from app.webhooks.service import WebhookRelay

        services.executor = Executor(settings, db)
        services.relay = WebhookRelay(db, settings)
    core.install(services)

    from app.runs import workflow  # registers the workflow before launch

    DBOS(config={
        "name": "codreamer",
        "system_database_url": dbos_database_url(settings),
        "executor_id": settings.executor_id,
        "log_level": "WARNING",
    })
    if not worker:
        DBOS.listen_queues([])
    DBOS.launch()
    await DBOS.register_queue_async(workflow.RUNS_QUEUE, global_concurrency=settings.max_concurrent_runs, polling_interval_sec=0.2)
    if worker:
        services.relay_task = asyncio.create_task(services.relay.run_forever())
        async with db.read() as session:  # runs whose enqueue a crash may have lost (enqueue dedupes)
            queued = (await session.execute(select(Run.id, Run.attempt).where(Run.status == "queued"))).all()
        for run_id, attempt in queued:
            await workflow.enqueue(run_id, attempt)
    return services


async def stop(services: core.Services) -> None:
    if services.relay is not None:
        services.relay_task.cancel()
        await services.relay.close()
    DBOS.destroy(destroy_registry=False)
    if services.executor is not None:
        await services.executor.close()
    await services.db.close()
