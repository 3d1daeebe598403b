"""A graph upload, read off the event loop: parsed a piece at a time, validated a node at a time, within the caps.

`POST /graphs` and `PUT /graphs/{id}` read their bodies here (not through FastAPI's body parser), so that a
large graph neither holds up other requests nor is echoed whole in a validation error.
"""

import json
import re

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.kit.docs import inline_refs
from app.kit.errors import BadRequest
from app.kit.settings import Settings
from app.knowledge_graph.schemas import Edge, GraphDocument, Node, Scenario

# The routes read the body themselves (read_upload), so FastAPI documents neither it nor its 422.
BODY = {"requestBody": {"required": True, "content": {"application/json": {
    "schema": inline_refs(GraphDocument.model_json_schema())}}}}
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
        raise BadRequest("There was an error parsing the body") from None
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


async def read_upload(request: Request, caps: Settings, path_id: str | None = None) -> GraphDocument:
    """The request's graph document, parsed and validated off the event loop, within the caps;
    with `path_id` (a replacement), the document's id must be the path's."""
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
    if path_id is not None and document.id != path_id:
        raise RequestValidationError([{"type": "value_error", "loc": ("body", "id"), "input": document.id,
                                       "msg": f"the document's id {document.id!r} is not the path's {path_id!r}"}])
    return document
