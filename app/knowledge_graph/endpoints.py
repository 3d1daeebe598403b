from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, status
from pydantic import BaseModel

from app.deps import NOT_FOUND, BODY_ERRORS, ErrorOut, ReadSession, ServicesDep, not_found
from app.knowledge_graph import repository
from app.knowledge_graph.schemas import GraphDocument, Node, Scenario

router = APIRouter(prefix="/graphs", tags=["knowledge graphs"])


class GraphSummary(BaseModel):
    id: str
    name: str
    nodes: int
    edges: int
    scenarios: int


class GraphList(BaseModel):
    data: list[GraphSummary]


class NodePage(BaseModel):
    data: list[Node]
    has_more: bool


class Neighbor(BaseModel):
    id: str
    relation: str
    direction: str


class NodeDetail(Node):
    neighbors: list[Neighbor]


class ScenarioList(BaseModel):
    data: list[Scenario]


@router.get("", response_model=GraphList, summary="List knowledge graphs")
async def list_graphs(session: ReadSession) -> dict:
    """Each graph's id, name and counts of nodes, edges and scenarios."""
    return {"data": await repository.summaries(session)}


@router.post("", response_model=GraphSummary, status_code=status.HTTP_201_CREATED, summary="Upload a knowledge graph",
             responses={409: {"model": ErrorOut, "description": "A graph with this id exists"}, **BODY_ERRORS})
async def create_graph(document: GraphDocument, svc: ServicesDep) -> dict:
    """Validated whole before anything is written; errors name the culprit."""
    async with svc.db.transaction() as session:
        if await repository.exists(session, document.id):
            raise HTTPException(409, f"graph {document.id!r} already exists")
        await repository.save(session, document)
    return {"id": document.id, "name": document.name, "nodes": len(document.nodes),
            "edges": len(document.edges), "scenarios": len(document.scenarios)}


async def _require_graph(session, graph_id: str) -> None:
    if not await repository.exists(session, graph_id):
        raise not_found(f"graph {graph_id!r}")


@router.get("/{graph_id}/nodes", response_model=NodePage, summary="List a graph's nodes", responses=NOT_FOUND)
async def list_nodes(
    graph_id: str, session: ReadSession,
    type: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    after: Annotated[str | None, Query(max_length=200, description="A node id: the page starts after it.")] = None,
) -> dict:
    """Cursor-paginated, optionally filtered by node type."""
    await _require_graph(session, graph_id)
    nodes, has_more = await repository.nodes_page(session, graph_id, type=type, after=after, limit=limit)
    return {"data": nodes, "has_more": has_more}


@router.get("/{graph_id}/nodes/{node_id}", response_model=NodeDetail, summary="A node and its neighbours", responses=NOT_FOUND)
async def get_node(graph_id: str, node_id: str, session: ReadSession) -> dict:
    """The node with its neighbours, their relation and its direction."""
    await _require_graph(session, graph_id)
    found = await repository.node_with_neighbors(session, graph_id, node_id)
    if found is None:
        raise not_found(f"node {node_id!r} in graph {graph_id!r}")
    node, neighbors = found
    return node.model_dump() | {"neighbors": neighbors}


@router.get("/{graph_id}/scenarios", response_model=ScenarioList, summary="A graph's scenarios", responses=NOT_FOUND)
async def list_scenarios(graph_id: str, session: ReadSession) -> dict:
    """The prospects and goals the graph's learning loops train on."""
    await _require_graph(session, graph_id)
    return {"data": await repository.scenarios(session, graph_id)}
