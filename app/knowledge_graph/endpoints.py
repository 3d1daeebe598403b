import json
import re
from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from app.deps import BODY_ERRORS, NOT_FOUND, DatabaseDep, ErrorOut, ReadSession, SettingsDep, TenantDep, not_found
from app.knowledge_graph import repository
from app.knowledge_graph.service import GraphsDep, RunsOnGraphDep
from app.knowledge_graph.schemas import Edge, GraphDocument, Node, Scenario
from app.settings import Settings

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
async def list_graphs(session: ReadSession, tenant: TenantDep) -> dict:
    """Each graph's id, name and counts of nodes, edges and scenarios."""
    return {"data": await repository.summaries(session, tenant)}


def _inline_refs(schema, defs: dict | None = None):
    """A JSON schema with its `$defs` written in place, so it can stand alone in the OpenAPI document."""
    if defs is None:
        schema = dict(schema)
        defs = schema.pop("$defs", {})
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inline_refs(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
        return {key: _inline_refs(value, defs) for key, value in schema.items()}
    if isinstance(schema, list):
        return [_inline_refs(value, defs) for value in schema]
    return schema


# the body is read by the route itself (see create_graph), so FastAPI does not document its 422
INVALID = {422: {"description": "Validation Error", "content": {"application/json": {
    "schema": {"$ref": "#/components/schemas/HTTPValidationError"}}}}}
_ITEMS = {"nodes": Node, "edges": Edge, "scenarios": Scenario}
_WS = re.compile(r"[ \t\n\r]*")
_decoder = json.JSONDecoder()


def _decode_upload(text: str):
    """json.loads(text), but each node, edge and scenario of the top-level object is its own short call.

    Run in a worker thread, the thread gives the GIL back between calls, so the event loop keeps
    serving while a large graph is parsed (json.loads of 20 MB would hold it for most of a second).
    Raises json.JSONDecodeError as json.loads does.
    """
    def skip(index: int) -> int:
        return _WS.match(text, index).end()

    def expect(index: int, char: str, what: str) -> int:
        if not text.startswith(char, index):
            raise json.JSONDecodeError(f"Expecting {what}", text, index)
        return skip(index + 1)

    index = skip(0)
    if not text.startswith("{", index):  # not an object: small or wrong, one call is fine
        value, index = _decoder.raw_decode(text, index)
        if skip(index) != len(text):
            raise json.JSONDecodeError("Extra data", text, skip(index))
        return value
    document, index = {}, skip(index + 1)
    closed = text.startswith("}", index)
    while not closed:
        if not text.startswith('"', index):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, index)
        key, index = _decoder.raw_decode(text, index)
        index = expect(skip(index), ":", "':' delimiter")
        if key in _ITEMS and text.startswith("[", index):
            items, index = [], skip(index + 1)
            while not text.startswith("]", index):
                item, index = _decoder.raw_decode(text, index)
                items.append(item)
                index = skip(index)
                if text.startswith("]", index):
                    break
                index = expect(index, ",", "',' delimiter")
                if text.startswith("]", index):  # json.loads refuses a trailing comma too
                    raise json.JSONDecodeError("Expecting value", text, index)
            value, index = items, index + 1
        else:
            value, index = _decoder.raw_decode(text, index)
        document[key] = value  # a repeated key: the last one wins, as with json.loads
        index = skip(index)
        closed = text.startswith("}", index)
        if not closed:
            index = expect(index, ",", "',' delimiter")
    index = skip(index + 1)
    if index != len(text):
        raise json.JSONDecodeError("Extra data", text, index)
    return document


def _errors(exc: ValidationError, *prefix) -> list[dict]:
    return [{**error, "loc": ("body", *prefix, *error["loc"])} for error in exc.errors(include_url=False)]


def validate_upload(body: bytes) -> GraphDocument:
    """A graph upload parsed and validated piece by piece (see `_decode_upload`): each node, edge
    and scenario is validated on its own, then the whole document with them in place (its
    references are checked in Python). Errors are FastAPI's (`loc` from `body`)."""
    if not body:
        raise RequestValidationError([{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}])
    try:
        document = _decode_upload(body.decode(json.detect_encoding(body), "surrogatepass"))
    except json.JSONDecodeError as exc:
        raise RequestValidationError([{"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error",
                                       "input": {}, "ctx": {"error": exc.msg}}]) from None
    except (UnicodeDecodeError, RecursionError, ValueError):  # bad encoding, nested too deeply, a 5000-digit integer
        raise HTTPException(400, "There was an error parsing the body") from None
    errors: list[dict] = []
    failed: set[str] = set()
    if isinstance(document, dict):
        for key, model in _ITEMS.items():
            items = document.get(key)
            if not isinstance(items, list):
                continue
            valid = []
            for position, item in enumerate(items):
                try:
                    valid.append(model.model_validate(item))
                except ValidationError as exc:
                    errors += _errors(exc, key, position)
                    failed.add(key)
            document[key] = valid
    try:
        validated = GraphDocument.model_validate(document)
    except ValidationError as exc:  # with invalid items left out, a list is not also "too short", nor a reference dangling
        errors += [error for error in _errors(exc) if not failed or (len(error["loc"]) > 1 and error["loc"][1] not in failed)]
    if errors:
        raise RequestValidationError(errors)
    return validated


async def _read_upload(request: Request, caps: Settings) -> GraphDocument:
    """The request's graph document, parsed and validated off the event loop, within the caps."""
    media_type = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if media_type != "application/json" and not (media_type.startswith("application/") and media_type.endswith("+json")):
        raise RequestValidationError([{"type": "model_attributes_type", "loc": ("body",), "input": media_type,
                                       "msg": "Input should be a valid dictionary or object to extract fields from (send JSON)"}])
    document = await run_in_threadpool(validate_upload, await request.body())
    for what, count, cap, setting in (("nodes", len(document.nodes), caps.max_graph_nodes, "MAX_GRAPH_NODES"),
                                      ("edges", len(document.edges), caps.max_graph_edges, "MAX_GRAPH_EDGES"),
                                      ("scenarios", len(document.scenarios), caps.max_graph_scenarios, "MAX_GRAPH_SCENARIOS")):
        if count > cap:
            raise RequestValidationError([{"type": "too_long", "loc": ("body", what), "input": None,
                                           "msg": f"{count} {what} is over the cap {setting}={cap}"}])
    return document


@router.post("", response_model=GraphSummary, status_code=status.HTTP_201_CREATED, summary="Upload a knowledge graph",
             responses={409: {"model": ErrorOut, "description": "A graph with this id exists"}, **BODY_ERRORS, **INVALID},
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": _inline_refs(GraphDocument.model_json_schema())}}}})
async def create_graph(request: Request, db: DatabaseDep, settings: SettingsDep, tenant: TenantDep) -> dict:
    """Validated whole before anything is written; errors name the culprit.

    Parsing and validation run in a worker thread, a node at a time, so a large upload does not
    hold up other requests.
    """
    document = await _read_upload(request, settings)
    async with db.transaction() as session:
        if await repository.exists(session, document.id):
            raise HTTPException(409, f"graph id {document.id!r} is taken; choose another")
        await repository.save(session, document, tenant)
    return _summary(document)


def _summary(document: GraphDocument) -> dict:
    return {"id": document.id, "name": document.name, "nodes": len(document.nodes),
            "edges": len(document.edges), "scenarios": len(document.scenarios)}


async def _require_graph(session, graph_id: str, tenant: str) -> None:
    if not await repository.visible(session, graph_id, tenant):
        raise not_found(f"graph {graph_id!r}")


@router.get("/{graph_id}/nodes", response_model=NodePage, summary="List a graph's nodes", responses=NOT_FOUND)
async def list_nodes(
    tenant: TenantDep, graph_id: str, session: ReadSession,
    type: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    after: Annotated[str | None, Query(max_length=200, description="A node id: the page starts after it.")] = None,
) -> dict:
    """Cursor-paginated, optionally filtered by node type."""
    await _require_graph(session, graph_id, tenant)
    nodes, has_more = await repository.nodes_page(session, graph_id, type=type, after=after, limit=limit)
    return {"data": nodes, "has_more": has_more}


@router.get("/{graph_id}/nodes/{node_id}", response_model=NodeDetail, summary="A node and its neighbours", responses=NOT_FOUND)
async def get_node(tenant: TenantDep, graph_id: str, node_id: str, session: ReadSession) -> dict:
    """The node with its neighbours, their relation and its direction."""
    await _require_graph(session, graph_id, tenant)
    found = await repository.node_with_neighbors(session, graph_id, node_id)
    if found is None:
        raise not_found(f"node {node_id!r} in graph {graph_id!r}")
    node, neighbors = found
    return node.model_dump() | {"neighbors": neighbors}


@router.get("/{graph_id}/scenarios", response_model=ScenarioList, summary="A graph's scenarios", responses=NOT_FOUND)
async def list_scenarios(tenant: TenantDep, graph_id: str, session: ReadSession) -> dict:
    """The prospects and goals the graph's learning loops train on."""
    await _require_graph(session, graph_id, tenant)
    return {"data": await repository.scenarios(session, graph_id)}


IN_USE = {409: {"model": ErrorOut, "description": "The graph is in use by a run, or is shared and cannot be changed"}}


async def _owned_or_refuse(session, graph_id: str, tenant: str) -> None:
    """404 for a graph the tenant cannot see, 409 for a shared one (the demo): nobody may change it."""
    if not await repository.visible(session, graph_id, tenant):
        raise not_found(f"graph {graph_id!r}")
    if await repository.owned(session, graph_id, tenant) is None:
        raise HTTPException(409, f"graph {graph_id!r} is shared with every tenant and cannot be replaced or deleted")


@router.get("/{graph_id}", response_model=GraphDocument, summary="A whole graph document", responses=NOT_FOUND)
async def get_graph(tenant: TenantDep, graph_id: str, db: DatabaseDep, graphs: GraphsDep) -> dict:
    """The graph as uploaded: nodes (ordered by id), edges and scenarios (in upload order)."""
    async with db.read() as session:
        await _require_graph(session, graph_id, tenant)
    graph = await graphs.get(graph_id)
    if graph is None:
        raise not_found(f"graph {graph_id!r}")
    return graph.document.model_dump()


@router.put("/{graph_id}", response_model=GraphSummary, summary="Replace a knowledge graph",
            responses={**IN_USE, **NOT_FOUND, **BODY_ERRORS, **INVALID},
            openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                "schema": _inline_refs(GraphDocument.model_json_schema())}}}})
async def replace_graph(
    tenant: TenantDep, graph_id: str, request: Request, db: DatabaseDep, settings: SettingsDep, graphs: GraphsDep,
    runs_on_graph: RunsOnGraphDep,
) -> dict:
    """Validated as an upload; the document's `id` must be the path's. Refused (409) while a run on
    the graph is queued or running. Finished runs keep their records; their node scores cover the
    new graph's nodes (a node that vanished is no longer listed)."""
    async with db.read() as session:
        await _owned_or_refuse(session, graph_id, tenant)
    document = await _read_upload(request, settings)
    if document.id != graph_id:
        raise RequestValidationError([{"type": "value_error", "loc": ("body", "id"), "input": document.id,
                                       "msg": f"the document's id {document.id!r} is not the path's {graph_id!r}"}])
    async with db.transaction() as session:
        await _owned_or_refuse(session, graph_id, tenant)
        if active := await runs_on_graph(session, graph_id, active_only=True):
            raise HTTPException(409, f"graph {graph_id!r} is in use by {active} queued or running run(s); "
                                     "wait for them to finish or cancel them")
        await repository.replace(session, document)
    graphs.invalidate(graph_id)
    return _summary(document)


@router.delete("/{graph_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a knowledge graph",
               responses={**IN_USE, **NOT_FOUND})
async def delete_graph(
    tenant: TenantDep, graph_id: str, db: DatabaseDep, graphs: GraphsDep, runs_on_graph: RunsOnGraphDep,
) -> Response:
    """Refused (409) while any run, finished or not, refers to the graph (delete those runs first),
    and for the shared demo graph."""
    async with db.transaction() as session:
        await _owned_or_refuse(session, graph_id, tenant)
        if runs := await runs_on_graph(session, graph_id, active_only=False):
            raise HTTPException(409, f"graph {graph_id!r} is in use by {runs} run(s); delete them first (DELETE /runs/{{id}})")
        await repository.remove(session, graph_id)
    graphs.invalidate(graph_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
