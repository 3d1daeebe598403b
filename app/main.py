"""The FastAPI application: routers of each domain, auth, body limits, and the lifespan."""

import json
import logging
import math
import re
from contextlib import asynccontextmanager
from urllib.parse import parse_qsl

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from app import docs, lifecycle, migrations
from app.auth import ApiKeyAuth, parse_api_keys
from app.db import is_transient
from app.deps import UNAUTHORIZED, DatabaseDep, api_key_scheme, reject_unknown_query_params
from app.events.endpoints import document_webhooks
from app.knowledge_graph.endpoints import router as graphs_router
from app.runs.endpoints import router as runs_router
from app.runs.events import WEBHOOK_MODELS
from app.ui.endpoints import router as ui_router
from app.settings import Settings, get_settings

log = logging.getLogger("codreamer")
RETRY_AFTER_S = 5


class BodyLimit:
    """Refuses bodies over the limit with 413 (graph uploads get their own limit).

    A declared Content-Length over the limit is refused before anything is read. A chunked body
    is counted as it arrives: once it passes the limit the answer is the 413, whatever the code
    reading the body made of the error (FastAPI's parser turns it into a 400, for one).
    """

    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"].rstrip("/")
        upload = path == "/graphs" or (scope.get("method") == "PUT" and path.startswith("/graphs/") and path.count("/") == 2)
        limit = self.settings.max_graph_bytes if upload else self.settings.max_body_bytes
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return await self._refuse(send, limit)
        received, too_large, started, refused = 0, False, False, False

        async def limited_receive():
            nonlocal received, too_large
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                too_large = True
                raise _TooLarge(limit)
            return message

        async def guarded_send(message) -> None:
            nonlocal started, refused
            if refused:
                return  # the rest of the app's own answer to the too-large body
            if too_large and not started and message["type"] == "http.response.start":
                refused = True
                return await self._refuse(send, limit)
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _TooLarge:
            if not started and not refused:
                await self._refuse(send, limit)

    @staticmethod
    async def _refuse(send: Send, limit: int) -> None:
        response = JSONResponse({"detail": f"request body exceeds {limit} bytes"}, status_code=413)
        await response({"type": "http"}, None, send)


class _TooLarge(StarletteHTTPException):
    """An HTTPException, so that FastAPI's body parser re-raises it instead of answering 400."""

    def __init__(self, limit: int):
        super().__init__(413, f"request body exceeds {limit} bytes")


EXCERPT_CHARS = 200  # of each offending input a validation error echoes
MAX_ERRORS = 50  # validation errors listed in one answer
_SURROGATE = re.compile("[\ud800-\udfff]")
_SUSPECT_ESCAPE = re.compile(rb"\\u(?:[dD][89a-fA-F]|0000)")  # \ud800-\udfff or \u0000 escaped in JSON text


def _printable(text: str) -> str:
    """The text with lone surrogates written as escapes (they cannot be encoded to UTF-8)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8") if _SURROGATE.search(text) else text


def excerpt(value, limit: int = EXCERPT_CHARS):
    """A JSON-safe stand-in for an input a validation error echoes: the value when it is short,
    else the start of its JSON text. Never more than about `limit` characters, however large the
    input (only that much of it is ever serialized)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if value.bit_length() <= 256 else f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, float):
        return value if math.isfinite(value) else ("NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity"))
    if isinstance(value, str):
        return _printable(value if len(value) <= limit else value[:limit] + "…")
    if isinstance(value, (bytes, bytearray)):
        return _printable(bytes(value[: limit * 4]).decode("utf-8", "replace")[:limit] + ("…" if len(value) > limit else ""))
    if isinstance(value, BaseException):
        return excerpt(str(value), limit)
    replaced = False

    def default(obj):
        nonlocal replaced
        replaced = True
        return obj.model_dump() if isinstance(obj, BaseModel) else str(obj)

    text, truncated = "", False
    try:  # the pure-Python encoder yields as it goes: a large input is serialized only up to the limit
        for chunk in json.JSONEncoder(ensure_ascii=False, default=default).iterencode(value):
            text += chunk
            if len(text) > limit:
                text, truncated = text[:limit] + "…", True
                break
    except (TypeError, ValueError):
        return _printable(repr(value)[:limit])
    if not truncated and not replaced and not _SURROGATE.search(text) and not re.search(r"NaN|Infinity", text):
        return value
    return _printable(text)


def validation_details(errors) -> list[dict]:
    """Errors as FastAPI lists them (type, loc, msg, input, ctx), each input cut to an excerpt and
    made JSON-safe (NaN, lone surrogates), at most MAX_ERRORS of them."""
    details = []
    for error in list(errors)[:MAX_ERRORS]:
        detail = {"type": error.get("type", "value_error"),
                  "loc": [part if isinstance(part, int) else excerpt(str(part)) for part in error.get("loc", ())],
                  "msg": excerpt(str(error.get("msg", "")), 500)}
        if "input" in error:
            detail["input"] = excerpt(error["input"])
        if error.get("ctx"):
            detail["ctx"] = {str(key): excerpt(value) for key, value in error["ctx"].items()}
        details.append(detail)
    if len(errors) > MAX_ERRORS:
        details.append({"type": "too_many_errors", "loc": [], "msg": f"{len(errors) - MAX_ERRORS} more errors not listed"})
    return details


class _NonFinite(str):
    """A NaN, Infinity or overflowing number met while parsing, kept as its text to be reported."""


def json_body_errors(body: bytes) -> list[dict]:
    """What no JSON column or text column can hold, in a JSON body: NaN and Infinity (and numbers
    that overflow to them), lone UTF-16 surrogates and NUL characters, each with its field path.
    [] when there is none, or when the body is not JSON at all (the route's parser says so)."""
    flagged = False

    def constant(name: str):
        nonlocal flagged
        flagged = True
        return _NonFinite(name)

    def number(text: str):
        nonlocal flagged
        value = float(text)
        if math.isfinite(value):
            return value
        flagged = True
        return _NonFinite(text)

    try:
        document = json.loads(body, parse_constant=constant, parse_float=number)
    except Exception:  # not JSON text: left to the route, which answers 400 or 422
        return []
    try:  # lone surrogates come either escaped or (decoded with surrogatepass) as bytes that are not UTF-8
        body.decode("utf-8")
        strings_suspect = _SUSPECT_ESCAPE.search(body) is not None
    except UnicodeDecodeError:
        strings_suspect = True
    if not flagged and not strings_suspect:
        return []
    errors: list[dict] = []

    def check_string(text: str, loc: tuple) -> None:
        if _SURROGATE.search(text):
            errors.append({"type": "string_unicode", "loc": ("body", *loc), "input": text,
                           "msg": "Input should be a valid string: a lone UTF-16 surrogate (\\ud800-\\udfff) is not a character"})
        elif "\x00" in text:
            errors.append({"type": "string_pattern_mismatch", "loc": ("body", *loc), "input": text,
                           "msg": "String should not contain NUL characters (\\u0000)"})

    stack = [((), document)]  # depth-first in document order, iterative: as deep as the parser went
    while stack and len(errors) <= MAX_ERRORS:
        loc, item = stack.pop()
        if isinstance(item, _NonFinite):
            errors.append({"type": "finite_number", "loc": ("body", *loc), "input": str(item),
                           "msg": "Input should be a finite number (JSON has no NaN or Infinity)"})
        elif isinstance(item, str):
            check_string(item, loc)
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                stack += [((*loc, key), child), ((*loc, key), key)]  # the key is checked first
        elif isinstance(item, list):
            stack.extend(((*loc, index), child) for index, child in reversed(list(enumerate(item))))
    return errors


def _is_json(scope: Scope) -> bool:
    content_type = dict(scope["headers"]).get(b"content-type", b"").split(b";")[0].strip().lower()
    return content_type == b"application/json" or (content_type.startswith(b"application/") and content_type.endswith(b"+json"))


class StrictInput:
    """Refuses, before any route sees it, what would reach the database as something it cannot store.

    - a NUL character (or a lone surrogate) in the path: 404 (no id contains one);
    - a NUL character in a query parameter: 422 naming it;
    - in a JSON body (up to MAX_BODY_BYTES; larger graph uploads are parsed by their route, off the
      event loop), NaN, Infinity, numbers too large for a float, lone surrogates and NUL characters:
      422 naming each field. The body is read once, through BodyLimit, and handed on unchanged.
    """

    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.max_checked = settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if "\x00" in scope["path"] or _SURROGATE.search(scope["path"]):  # servers decode %ED%A0%80 to U+FFFD, but a raw scope may not
            return await JSONResponse({"detail": "not found: the path contains a NUL character or a lone surrogate"}, 404)(scope, receive, send)
        query = scope.get("query_string", b"")
        if b"%00" in query or b"\x00" in query:
            names = [name for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True) if "\x00" in name + value]
            errors = [{"type": "string_pattern_mismatch", "loc": ("query", name), "msg": "String should not contain NUL characters (\\u0000)"}
                      for name in names]
            if errors:
                return await JSONResponse({"detail": validation_details(errors)}, 422)(scope, receive, send)
        if not _is_json(scope):
            return await self.app(scope, receive, send)
        chunks, last = [], None
        while True:
            message = await receive()
            if message["type"] != "http.request":
                last = message  # the client went away: the route learns it on its next receive
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and len(body) <= self.max_checked and (errors := json_body_errors(body)):
            return await JSONResponse({"detail": validation_details(errors)}, 422)(scope, receive, send)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return last or await receive()

        await self.app(scope, replay, send)


PUBLIC = frozenset({"/healthz", "/readyz", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json", "/", "/ui"})
PUBLIC_PREFIXES = (docs.STATIC_PATH + "/", "/ui/")  # StaticFiles refuses paths that escape its folder


def route_methods(app: FastAPI) -> list[tuple[re.Pattern, frozenset[str]]]:
    """Each route's full-path pattern and methods, routes of included routers too."""
    try:  # recent FastAPI keeps included routers nested in app.routes
        from fastapi.routing import iter_route_contexts
        routes = list(iter_route_contexts(app.routes))
    except ImportError:  # older FastAPI lists every route flat
        routes = app.routes
    return [(compile_path(route.path)[0], frozenset(route.methods))
            for route in routes if getattr(route, "methods", None) and getattr(route, "path", None)]


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        services = await lifecycle.start(settings, worker=settings.run_worker)
        app.state.services = services.api
        try:
            yield
        finally:
            await lifecycle.stop(services)

    app = FastAPI(
        title="CoDreamer",
        version="0.1.0",
        summary="Reinforcement-learning learning loops for sales emails: generate, judge, GRPO, KG reweighting.",
        lifespan=lifespan,
        docs_url=None,  # app.docs serves both pages with local assets
        redoc_url=None,
        generate_unique_id_function=docs.operation_id,
    )
    secured = {"dependencies": [Depends(api_key_scheme), Depends(reject_unknown_query_params)], "responses": UNAUTHORIZED}
    app.include_router(runs_router, **secured)
    app.include_router(graphs_router, **secured)
    document_webhooks(app.webhooks, WEBHOOK_MODELS)
    app.include_router(ui_router)  # the dashboard's page and assets are public; its API calls carry the key
    docs.install(app)

    @app.get("/healthz", tags=["health"], summary="Liveness")
    async def get_health() -> dict:
        """200 while the process lives; checks nothing else."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Readiness: database reachable and migrated",
             responses={503: {"description": "Not ready"}})
    async def get_readiness(db: DatabaseDep) -> JSONResponse:
        """200 when the database is reachable and at the migration the code expects, else 503."""
        try:
            current = await migrations.current_revision(db.engine)
        except Exception as exc:  # any database failure means "not ready", never a 500
            return JSONResponse({"status": "unavailable", "detail": f"database unreachable: {type(exc).__name__}"}, 503)
        if current != migrations.head_revision():
            return JSONResponse({"status": "unavailable", "detail": f"database at {current}, code expects {migrations.head_revision()}"}, 503)
        return JSONResponse({"status": "ready"})

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        """As FastAPI's 422, but each input is echoed as a short excerpt, never a whole upload."""
        return JSONResponse({"detail": validation_details(exc.errors())}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """As FastAPI's, but a 405 lists every method of the path, not just the first route's."""
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            allowed = {m for pattern, methods in route_methods(app) if pattern.match(request.url.path) for m in methods}
            headers["Allow"] = ", ".join(sorted(allowed))
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=headers)

    async def database_trouble(request: Request, exc: Exception) -> JSONResponse:
        """The database is away or busy: 503 and come back, never a 500 (nothing was applied)."""
        if not is_transient(exc):
            return await unexpected(request, exc)
        log.warning("database unavailable on %s %s: %s", request.method, request.url.path, type(exc).__name__)
        return JSONResponse({"detail": "the database is unavailable; retry shortly (nothing was applied)"},
                            status_code=503, headers={"Retry-After": str(RETRY_AFTER_S)})

    for error in (SQLAlchemyError, ConnectionError, TimeoutError):  # handled here, not re-raised to the server
        app.add_exception_handler(error, database_trouble)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse({"detail": "internal error; the request was not applied"}, status_code=500)

    app.add_middleware(StrictInput, settings=settings)  # inside BodyLimit: it reads the body through the limit
    app.add_middleware(BodyLimit, settings=settings)
    app.add_middleware(ApiKeyAuth, keys=parse_api_keys(settings.api_keys), public=PUBLIC, public_prefixes=PUBLIC_PREFIXES)
    if settings.cors_origins:  # outermost: preflights carry no key, and a 401 must still be readable by the page
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins, allow_credentials=False,
            allow_methods=sorted({m for _, methods in route_methods(app) for m in methods}),
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
        )
    return app
