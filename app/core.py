"""Process-wide services: settings, database, graph cache, and (in workers) the run executor.

FastAPI dependencies and DBOS steps both reach them here; they are built once at start-up.
"""

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from app.db import Database
from app.knowledge_graph import repository as graphs_repository
from app.knowledge_graph.graph import KnowledgeGraph
from app.settings import Settings


class GraphCache:
    """Graphs are immutable once stored, so each process keeps the recently used ones."""

    def __init__(self, db: Database, size: int = 16):
        self.db = db
        self.size = size
        self._graphs: OrderedDict[str, KnowledgeGraph] = OrderedDict()

    async def get(self, graph_id: str) -> KnowledgeGraph | None:
        graph = self._graphs.get(graph_id)
        if graph is None:
            async with self.db.read() as session:
                graph = await graphs_repository.load(session, graph_id)
            if graph is None:
                return None
            self._graphs[graph_id] = graph
            while len(self._graphs) > self.size:
                self._graphs.popitem(last=False)
        self._graphs.move_to_end(graph_id)
        return graph


@dataclass
class Services:
    settings: Settings
    db: Database
    graphs: GraphCache
    executor: "object | None" = None  # app.runs.executor.Executor, in processes that run workflows
    relay: "object | None" = None  # app.webhooks.service.WebhookRelay, likewise
    relay_task: asyncio.Task | None = None


_services: Services | None = None


def install(services: Services) -> None:
    global _services
    _services = services


def services() -> Services:
    if _services is None:
        raise RuntimeError("services are not started")
    return _services
