"""Graphs in the database: written once on upload, read by the API and by runs."""

import asyncio
import json

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.db import utcnow
from app.kit.pages import fetch_page
from app.knowledge_graph.graph import KnowledgeGraph
from app.knowledge_graph.models import Graph, GraphEdge, GraphNode, GraphScenario
from app.knowledge_graph.schemas import Edge, GraphDocument, Node, Offer, Scenario, Sender

_BATCH = 5000


async def exists(session: AsyncSession, graph_id: str) -> bool:
    """Whether the id is taken, by any tenant: graph ids are one namespace."""
    return await session.get(Graph, graph_id) is not None


def _visible_to(tenant: str):
    return or_(Graph.tenant.is_(None), Graph.tenant == tenant)


async def visible(session: AsyncSession, graph_id: str, tenant: str) -> bool:
    """The tenant's own graphs and the shared ones (the demo)."""
    return await session.scalar(select(Graph.id).where(Graph.id == graph_id, _visible_to(tenant))) is not None


async def save(session: AsyncSession, document: GraphDocument, tenant: str | None = None) -> None:
    """`tenant` None shares the graph with every tenant (the bundled demo)."""
    session.add(Graph(id=document.id, tenant=tenant, name=document.name, **_extras(document)))
    await session.flush()
    await _insert_contents(session, document)


def _extras(document: GraphDocument) -> dict:
    """The document's fields beside its nodes, edges and scenarios, as the graph's row keeps them."""
    return {"sender": document.sender.model_dump(exclude_none=True) if document.sender else None,
            "offers": [o.model_dump(exclude_none=True) for o in document.offers] or None}


async def _insert_contents(session: AsyncSession, document: GraphDocument) -> None:
    rows = [
        (GraphNode, [n.model_dump() | {"graph_id": document.id} for n in document.nodes]),
        (GraphEdge, [e.model_dump() | {"graph_id": document.id, "position": i} for i, e in enumerate(document.edges)]),
        (GraphScenario, [
            {"graph_id": document.id, "id": s.id, "position": i, "prospect": s.prospect.model_dump(),
             "goal": s.goal, "seed_nodes": s.seed_nodes}
            for i, s in enumerate(document.scenarios)
        ]),
    ]
    for model, values in rows:
        for start in range(0, len(values), _BATCH):
            await session.execute(insert(model), values[start : start + _BATCH])


async def summaries(session: AsyncSession, tenant: str) -> list[dict]:
    graphs = (await session.scalars(select(Graph).where(_visible_to(tenant)).order_by(Graph.created_at, Graph.id))).all()
    counts = {}
    for model in (GraphNode, GraphEdge, GraphScenario):
        result = await session.execute(select(model.graph_id, func.count()).group_by(model.graph_id))
        counts[model] = dict(result.all())
    return [
        {"id": g.id, "name": g.name, "nodes": counts[GraphNode].get(g.id, 0), "edges": counts[GraphEdge].get(g.id, 0),
         "scenarios": counts[GraphScenario].get(g.id, 0)}
        for g in graphs
    ]


def _node(row: GraphNode) -> Node:
    return Node(id=row.id, type=row.type, title=row.title, text=row.text, tags=row.tags)


def _scenario(row: GraphScenario) -> Scenario:
    return Scenario(id=row.id, prospect=row.prospect, goal=row.goal, seed_nodes=row.seed_nodes)


async def nodes_page(session: AsyncSession, graph_id: str, *, type: str | None, after: str | None, limit: int) -> tuple[list[Node], bool]:
    query = select(GraphNode).where(GraphNode.graph_id == graph_id)
    if type is not None:
        query = query.where(GraphNode.type == type)
    if after is not None:
        query = query.where(GraphNode.id > after)
    rows, more = await fetch_page(session, query.order_by(GraphNode.id), limit)
    return [_node(r) for r in rows], more


async def node_with_neighbors(session: AsyncSession, graph_id: str, node_id: str) -> tuple[Node, list[dict]] | None:
    row = await session.get(GraphNode, (graph_id, node_id))
    if row is None:
        return None
    edges = (await session.scalars(
        select(GraphEdge).where(GraphEdge.graph_id == graph_id, (GraphEdge.source == node_id) | (GraphEdge.target == node_id))
        .order_by(GraphEdge.position)
    )).all()
    neighbors = [
        {"id": e.target, "relation": e.relation, "direction": "out"} if e.source == node_id
        else {"id": e.source, "relation": e.relation, "direction": "in"}
        for e in edges
    ]
    return _node(row), neighbors


async def scenarios(session: AsyncSession, graph_id: str) -> list[Scenario]:
    rows = (await session.scalars(select(GraphScenario).where(GraphScenario.graph_id == graph_id).order_by(GraphScenario.position))).all()
    return [_scenario(r) for r in rows]


async def scenario_ids(session: AsyncSession, graph_id: str) -> set[str]:
    return set((await session.scalars(select(GraphScenario.id).where(GraphScenario.graph_id == graph_id))).all())


async def load(session: AsyncSession, graph_id: str) -> KnowledgeGraph | None:
    graph = await session.get(Graph, graph_id)
    if graph is None:
        return None
    nodes = (await session.scalars(select(GraphNode).where(GraphNode.graph_id == graph_id).order_by(GraphNode.id))).all()
    edges = (await session.scalars(select(GraphEdge).where(GraphEdge.graph_id == graph_id).order_by(GraphEdge.position))).all()
    document = GraphDocument.model_construct(
        id=graph.id, name=graph.name, nodes=[_node(n) for n in nodes],
        edges=[Edge(source=e.source, target=e.target, relation=e.relation) for e in edges],
        scenarios=await scenarios(session, graph_id),
        sender=Sender.model_validate(graph.sender) if graph.sender else None,
        offers=[Offer.model_validate(o) for o in graph.offers or []],
    )
    return KnowledgeGraph(document)


RENDER_PAGE = 2000  # rows read per query when a whole document is rendered: the loop serves others between pages


def _json_items(items: list[dict]) -> bytes:
    return b",".join(json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode() for item in items)


async def document_json(session: AsyncSession, graph_id: str) -> bytes | None:
    """The whole stored document as JSON (nodes by id, edges and scenarios in upload order), as `document` would
    dump it, rendered a page of plain rows at a time with the encoding in a worker thread: a graph of 100,000 nodes
    never holds the event loop for long, and no model object per node is built or kept. None when there is no such
    graph; empty when it was replaced while it was read (its pages are separate statements)."""
    graph = await session.get(Graph, graph_id)
    if graph is None:
        return None
    head = json.dumps({"id": graph.id, "name": graph.name}, ensure_ascii=False, separators=(",", ":"))[:-1]
    parts = [head.encode(), b',"nodes":[']
    after: str | None = None
    while True:
        query = select(GraphNode.id, GraphNode.type, GraphNode.title, GraphNode.text, GraphNode.tags).where(
            GraphNode.graph_id == graph_id)
        if after is not None:
            query = query.where(GraphNode.id > after)
        rows = (await session.execute(query.order_by(GraphNode.id).limit(RENDER_PAGE))).all()
        if not rows:
            break
        if after is not None:
            parts.append(b",")
        parts.append(await asyncio.to_thread(_json_items, [
            {"id": id, "type": type, "title": title, "text": text, "tags": tags} for id, type, title, text, tags in rows]))
        after = rows[-1][0]
    parts.append(b'],"edges":[')
    position = -1
    while True:
        rows = (await session.execute(
            select(GraphEdge.position, GraphEdge.source, GraphEdge.target, GraphEdge.relation)
            .where(GraphEdge.graph_id == graph_id, GraphEdge.position > position)
            .order_by(GraphEdge.position).limit(RENDER_PAGE))).all()
        if not rows:
            break
        if position >= 0:
            parts.append(b",")
        parts.append(await asyncio.to_thread(_json_items, [
            {"source": source, "target": target, "relation": relation} for _, source, target, relation in rows]))
        position = rows[-1][0]
    parts.append(b'],"scenarios":[')
    parts.append(_json_items([scenario.model_dump() for scenario in await scenarios(session, graph_id)]))
    extras = {"sender": graph.sender, "offers": graph.offers or []}
    parts.append(b"]," + json.dumps(extras, ensure_ascii=False, separators=(",", ":"))[1:].encode())
    if await version(session, graph_id) != graph.created_at:
        return b""
    return await asyncio.to_thread(b"".join, parts)


async def owned(session: AsyncSession, graph_id: str, tenant: str) -> Graph | None:
    """The graph if this tenant uploaded it: shared graphs (the demo, tenant None) are nobody's to change."""
    return await session.scalar(select(Graph).where(Graph.id == graph_id, Graph.tenant == tenant))


async def document(session: AsyncSession, graph_id: str) -> GraphDocument | None:
    """The whole stored document: nodes (by id), edges and scenarios (in upload order)."""
    graph = await load(session, graph_id)
    return None if graph is None else graph.document


async def replace(session: AsyncSession, document: GraphDocument) -> None:
    """The graph's name, nodes, edges and scenarios swapped for the document's, in the caller's
    transaction. The graph row stays (finished runs refer to it); its `created_at` is renewed, which
    tells every process's GraphCache that its copy is stale."""
    for model in (GraphNode, GraphEdge, GraphScenario):
        await session.execute(delete(model).where(model.graph_id == document.id))
    await session.execute(update(Graph).where(Graph.id == document.id).values(name=document.name, created_at=utcnow(),
                                                                              **_extras(document)))
    await _insert_contents(session, document)


async def remove(session: AsyncSession, graph_id: str) -> None:
    """The graph and (by ON DELETE CASCADE, and explicitly for databases without it) its rows."""
    for model in (GraphNode, GraphEdge, GraphScenario):
        await session.execute(delete(model).where(model.graph_id == graph_id))
    await session.execute(delete(Graph).where(Graph.id == graph_id))


async def lock(session: AsyncSession, graph_id: str, *, shared: bool = False):
    """The graph's version, its row locked until the transaction ends: shared by runs being created on it,
    exclusive for a replacement or a deletion, so neither slips between the other's check and its write.
    None if it does not exist. (SQLite's write transactions take turns anyway.)"""
    return await session.scalar(select(Graph.created_at).where(Graph.id == graph_id).with_for_update(read=shared))


async def version(session: AsyncSession, graph_id: str):
    """When the graph was stored or last replaced; None if it does not exist."""
    return await session.scalar(select(Graph.created_at).where(Graph.id == graph_id))
