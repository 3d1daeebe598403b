"""Runs on this machine without a server: the service's own workflow, in-process, on a SQLite file.

`codreamer run`, the learning tests and the benchmarks start runs here, so what they measure
is the path `POST /learn-loop` takes: the same run creation, the same durable workflow, the
same persistence between steps.
"""

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from app.events import service as events
from app.events.models import Event
from app.events.schemas import Subject, SubjectKind
from app.kit.auth import OPEN_TENANT
from app.kit.settings import Settings
from app.knowledge_graph import repository as graphs
from app.knowledge_graph.schemas import GraphDocument
from app.lifecycle import worker
from app.runs import queue, repository, service
from app.runs.events import TERMINAL_EVENTS
from app.runs.schemas import LearnLoopRequest


@asynccontextmanager
async def local_service(data_dir: Path, settings: Settings) -> AsyncIterator[worker.Worker]:
    """A worker on `data_dir/codreamer.sqlite` (ART's files under `data_dir/.art`), stopped on exit."""
    data_dir.mkdir(parents=True, exist_ok=True)
    settings = settings.model_copy(update={
        "database_url": f"sqlite:///{data_dir.resolve() / 'codreamer.sqlite'}",
        "art_path": str(data_dir.resolve() / ".art"),
        "executor_id": f"local-{uuid.uuid4().hex[:8]}",
        "run_worker": True,
    })
    process = await worker.start(settings)
    try:
        yield process
    finally:
        await worker.stop(process)


async def add_graph(process: worker.Worker, document: GraphDocument) -> None:
    async with process.api.db.transaction() as session:
        if await graphs.exists(session, document.id):
            raise ValueError(f"graph {document.id!r} already exists")
        await graphs.save(session, document)


async def run_to_end(
    process: worker.Worker, request: LearnLoopRequest, on_event: Callable[[Event], None] = lambda _: None,
    poll_s: float = 0.05,
) -> dict:
    """Starts a run as `POST /learn-loop` does, feeds its events to `on_event`, returns the finished run."""
    created, _ = await service.create_run(process.api, request)
    subject, seen = Subject(SubjectKind.RUN, created.run_id, OPEN_TENANT), 0
    while True:
        async with process.api.db.read() as session:
            page, _ = await events.events_page(session, subject, after=seen, limit=1000)
        for event in page:
            seen = event.seq
            on_event(event)
            if event.type in TERMINAL_EVENTS:
                await queue.result(created.run_id)
                async with process.api.db.read() as session:
                    return await repository.get_run_view(session, created.run_id)
        await asyncio.sleep(poll_s)


async def iterations(process: worker.Worker, run_id: str) -> list[dict]:
    return await repository.iterations(process.api.db, run_id)
