"""Start-up and shut-down of the API's services, which every process opens (`app.lifecycle.worker` adds a worker's)."""

import asyncio
import logging
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from dbos import DBOS

from app import tasks
from app.backends.specs import BackendUnavailable, check_available
from app.core import Services
from app.events.signing import SecretBox
from app.events.stream import EventFeed
from app.kit import durable, logs, migrations
from app.kit.auth import parse_api_keys
from app.kit.db import Database
from app.kit.heap import freeze_startup_heap
from app.kit.observability import init_tracing
from app.kit.settings import Settings
from app.knowledge_graph import repository as graphs_repository
from app.knowledge_graph.service import GraphCache, demo_document
from app.outcomes import inbound_pool

log = logging.getLogger("codreamer")


class StartupError(RuntimeError):
    """A configuration the service refuses to start with; the message says what to change."""


DATABASE_ERRORS = logs.database_errors()
# How long the relay's poll or the housekeeping round in progress gets to finish at shutdown.
BACKGROUND_STOP_S = 10.0


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
    """What `start` brought up: the API's services (a worker's process adds its own, `app.lifecycle.worker.Worker`)."""

    api: Services


async def open_services(settings: Settings, *, api: bool = True) -> Services:
    """Checks the settings, migrates, loads the demo graph: what every process needs before DBOS."""
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
    services = Services(settings=settings, db=db, graphs=GraphCache(db), secrets=SecretBox(secret_key(settings)),
                        feed=EventFeed(db))
    services.health.append(db.problem)
    return services


async def start(settings: Settings) -> Process:
    """The API's process: it only enqueues and cancels workflows, through DBOS's client. Launched, DBOS would
    keep threads busy that an API never uses (a notifier waking 100 times a second, queue polling, a scheduler), each
    one taking the interpreter from the requests in turn."""
    services = await open_services(settings)
    try:
        await asyncio.to_thread(DBOS.migrate, dbos_database_url(settings))  # the client writes to DBOS's tables
        durable.connect(dbos_database_url(settings), tasks.APPLICATION_VERSION)
    except BaseException as exc:
        durable.disconnect()
        await services.db.close()
        if isinstance(exc, DATABASE_ERRORS):
            raise StartupError(logs.database_problem(settings.database_url, exc)) from None
        raise
    freeze_startup_heap()
    return Process(api=services)


async def stop(process: Process) -> None:
    durable.disconnect()
    await close_services(process.api)


async def close_services(services: Services) -> None:
    await inbound_pool.shutdown()  # the inbound parser's processes, if a reply started them
    await services.feed.close()
    await services.db.close()


def restore_default_executor() -> None:
    """DBOS makes its thread pool the loop's default executor, and shuts that pool down when destroyed."""
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(thread_name_prefix="codreamer"))
