"""Where graphs come from (the bundled demo and uploaded documents),
and who may read, replace or delete one."""

from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.db import Database
from app.kit.errors import Conflict, NotFound
from app.knowledge_graph import repository
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.schemas import GraphDocument

DEMO_DIR = Path(__file__).parent / "demo"


@lru_cache
def demo_document() -> GraphDocument:
    return GraphDocument.model_validate_json((DEMO_DIR / "graph.json").read_bytes())


@lru_cache
def demo_graph() -> KnowledgeGraph:
    return KnowledgeGraph(demo_document())


class GraphCache:
    """Each process keeps the recently used graphs.

    A graph changes only by `PUT /graphs/{id}` or `DELETE /graphs/{id}`, both refused while a run on
    it is queued or running; the process that served the request drops its copy (`invalidate`).
    Every process notices a replacement by the graph's `created_at`, which a replacement renews.
    """

    def __init__(self, db: Database, size: int = 16):
        self.db = db
        self.size = size
        self._graphs: OrderedDict[str, tuple[object, KnowledgeGraph]] = OrderedDict()

    async def get(self, graph_id: str) -> KnowledgeGraph | None:
        # a replacement renews the graph's created_at: reading it (a primary-key lookup)
        # tells any process whether its copy is stale
        async with self.db.read() as session:
            version = await repository.version(session, graph_id)
            if version is None:
                self._graphs.pop(graph_id, None)
                return None
            cached = self._graphs.get(graph_id)
            if cached is None or cached[0] != version:
                graph = await repository.load(session, graph_id)
                if graph is None:
                    return None
                cached = self._graphs[graph_id] = (version, graph)
                while len(self._graphs) > self.size:
                    self._graphs.popitem(last=False)
        if graph_id in self._graphs:  # a concurrent deletion may have dropped it meanwhile
            self._graphs.move_to_end(graph_id)
        return cached[1]

    def invalidate(self, graph_id: str) -> None:
        self._graphs.pop(graph_id, None)


async def require_visible(session: AsyncSession, graph_id: str, tenant: str) -> None:
    """404 unless the graph is the tenant's own or a shared one (the demo)."""
    if not await repository.visible(session, graph_id, tenant):
        raise NotFound(f"graph {graph_id!r} not found")


async def require_changeable(session: AsyncSession, graph_id: str, tenant: str) -> None:
    """404 for a graph the tenant cannot see, 409 for a shared one (the demo): nobody may change it."""
    await require_visible(session, graph_id, tenant)
    if await repository.owned(session, graph_id, tenant) is None:
        raise Conflict(f"graph {graph_id!r} is shared with every tenant and cannot be replaced or deleted")


READ_ATTEMPTS = 3  # a graph replaced while it is rendered is rendered again


async def document_json(db: Database, graph_id: str) -> bytes:
    """The whole document as JSON, as one consistent version of the graph."""
    for _ in range(READ_ATTEMPTS):
        async with db.read() as session:
            body = await repository.document_json(session, graph_id)
        if body is None:
            raise NotFound(f"graph {graph_id!r} not found")
        if body:
            return body
    raise Conflict(f"graph {graph_id!r} is being replaced again and again; retry")


async def create(session: AsyncSession, document: GraphDocument, tenant: str) -> None:
    """Stores a new graph as the tenant's; graph ids are one namespace across tenants (409 when taken)."""
    if await repository.exists(session, document.id):
        raise Conflict(f"graph id {document.id!r} is taken; choose another")
    await repository.save(session, document, tenant)


async def lock_changeable(session: AsyncSession, graph_id: str, tenant: str) -> None:
    """Locks the tenant's graph for its replacement or deletion in the caller's transaction (404 for a graph it cannot
    see, 409 for a shared one); what else may hold the graph back (the runs on it) is the caller's to check."""
    await repository.lock(session, graph_id)
    await require_changeable(session, graph_id, tenant)


async def get_graph_cache(request: Request) -> GraphCache:
    return request.app.state.services.graphs


GraphsDep = Annotated[GraphCache, Depends(get_graph_cache)]
