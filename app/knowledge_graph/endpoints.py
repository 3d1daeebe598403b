"""The graph routes: each reads its input, asks the service or repository, and answers (see the contract)."""

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status

from app.kit.deps import BODY_ERRORS, NOT_FOUND, DatabaseDep, ErrorOut, ReadSession, SettingsDep, TenantDep
from app.kit.errors import NotFound
from app.kit.pages import cursor_params
from app.knowledge_graph import repository, service, upload
from app.knowledge_graph.schemas import GraphDocument, GraphList, GraphSummary, NodeDetail, NodePage, ScenarioList

router = APIRouter(prefix="/graphs", tags=["knowledge graphs"])
NodesCursor = cursor_params(Annotated[str | None, Query(max_length=200, description="A node id: the page starts after it.")],
                            default_limit=100, max_limit=500)


@router.get("", response_model=GraphList, summary="List knowledge graphs")
async def list_graphs(session: ReadSession, tenant: TenantDep) -> dict:
    """Each graph's id, name and counts of nodes, edges and scenarios."""
    return {"data": await repository.summaries(session, tenant)}


@router.post("", response_model=GraphSummary, status_code=status.HTTP_201_CREATED, summary="Upload a knowledge graph",
             responses={409: {"model": ErrorOut, "description": "A graph with this id exists"}, **BODY_ERRORS, **upload.INVALID},
             openapi_extra=upload.BODY)
async def create_graph(request: Request, db: DatabaseDep, settings: SettingsDep, tenant: TenantDep) -> GraphSummary:
    """Validated whole before anything is written; errors name the culprit.

    Parsing and validation run in a worker thread, a node at a time, so a large upload does not
    hold up other requests.
    """
    document = await upload.read_upload(request, settings)
    async with db.transaction() as session:
        await service.create(session, document, tenant)
    return GraphSummary.of(document)


@router.get("/{graph_id}/nodes", response_model=NodePage, summary="List a graph's nodes", responses=NOT_FOUND)
async def list_nodes(
    tenant: TenantDep, graph_id: str, session: ReadSession, page: NodesCursor,
    type: Annotated[str | None, Query(max_length=64)] = None,
) -> dict:
    """Cursor-paginated, optionally filtered by node type."""
    await service.require_visible(session, graph_id, tenant)
    nodes, has_more = await repository.nodes_page(session, graph_id, type=type, after=page.after, limit=page.limit)
    return {"data": nodes, "has_more": has_more}


@router.get("/{graph_id}/nodes/{node_id}", response_model=NodeDetail, summary="A node and its neighbours", responses=NOT_FOUND)
async def get_node(tenant: TenantDep, graph_id: str, node_id: str, session: ReadSession) -> dict:
    """The node with its neighbours, their relation and its direction."""
    await service.require_visible(session, graph_id, tenant)
    found = await repository.node_with_neighbors(session, graph_id, node_id)
    if found is None:
        raise NotFound(f"node {node_id!r} in graph {graph_id!r} not found")
    node, neighbors = found
    return node.model_dump() | {"neighbors": neighbors}


@router.get("/{graph_id}/scenarios", response_model=ScenarioList, summary="A graph's scenarios", responses=NOT_FOUND)
async def list_scenarios(tenant: TenantDep, graph_id: str, session: ReadSession) -> dict:
    """The prospects and goals the graph's learning loops train on."""
    await service.require_visible(session, graph_id, tenant)
    return {"data": await repository.scenarios(session, graph_id)}


@router.get("/{graph_id}", response_model=GraphDocument, summary="A whole graph document", responses=NOT_FOUND)
async def get_graph(tenant: TenantDep, graph_id: str, db: DatabaseDep) -> Response:
    """The graph as uploaded: nodes (ordered by id), edges and scenarios (in upload order). Rendered from the stored
    rows a page at a time, off the event loop, so one large graph does not hold up other requests."""
    async with db.read() as session:
        await service.require_visible(session, graph_id, tenant)
    return Response(await service.document_json(db, graph_id), media_type="application/json")
