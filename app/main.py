"""The FastAPI application: routers of each domain, auth, body limits, and the lifespan."""

import logging
import re
import secrets
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from app import docs, lifecycle, migrations
from app.db import is_transient
from app.deps import UNAUTHORIZED, ServicesDep, api_key_scheme, reject_unknown_query_params
from app.events.endpoints import document_webhooks
from app.knowledge_graph.endpoints import router as graphs_router
from app.runs.endpoints import router as runs_router
from app.ui.endpoints import router as ui_router
from app.settings import Settings, get_settings

log = logging.getLogger("codreamer")
RETRY_AFTER_S = 5


class BodyLimit:
    """Refuses bodies over the limit with 413 before they are parsed (graph uploads get their own limit)."""

    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.settings.max_graph_bytes if scope["path"].rstrip("/") == "/graphs" else self.settings.max_body_bytes
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            return await self._refuse(send, limit)
        received = 0

        async def limited_receive():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _TooLarge:
            await self._refuse(send, limit)

    @staticmethod
    async def _refuse(send: Send, limit: int) -> None:
        response = JSONResponse({"detail": f"request body exceeds {limit} bytes"}, status_code=413)
        await response({"type": "http"}, None, send)


class _TooLarge(Exception):
    pass


class ApiKeyAuth:
    """With API_KEYS set, every path but health, docs and the docs' assets needs `Authorization: Bearer <key>`.

    Checked before routing, so no body is parsed and nothing is validated for an unknown caller.
    """

    PUBLIC = frozenset({"/healthz", "/readyz", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json", "/", "/ui"})
    PUBLIC_PREFIXES = (docs.STATIC_PATH + "/", "/ui/")  # StaticFiles refuses paths that escape its folder

    def __init__(self, app: ASGIApp, settings: Settings):
        self.app = app
        self.keys = [key.encode() for key in settings.api_keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys or scope["path"] in self.PUBLIC or scope["path"].startswith(self.PUBLIC_PREFIXES):
            return await self.app(scope, receive, send)
        scheme, _, token = dict(scope["headers"]).get(b"authorization", b"").partition(b" ")
        if scheme.lower() == b"bearer" and any(secrets.compare_digest(token, key) for key in self.keys):
            return await self.app(scope, receive, send)
        response = JSONResponse({"detail": "missing or invalid API key: send 'Authorization: Bearer <key>'"},
                                status_code=401, headers={"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)


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
    document_webhooks(app.webhooks)
    app.include_router(ui_router)  # the dashboard's page and assets are public; its API calls carry the key
    docs.install(app)

    @app.get("/healthz", tags=["health"], summary="Liveness")
    async def get_health() -> dict:
        """200 while the process lives; checks nothing else."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], summary="Readiness: database reachable and migrated",
             responses={503: {"description": "Not ready"}})
    async def get_readiness(svc: ServicesDep) -> JSONResponse:
        """200 when the database is reachable and at the migration the code expects, else 503."""
        try:
            current = await migrations.current_revision(svc.db.engine)
        except Exception as exc:  # any database failure means "not ready", never a 500
            return JSONResponse({"status": "unavailable", "detail": f"database unreachable: {type(exc).__name__}"}, 503)
        if current != migrations.head_revision():
            return JSONResponse({"status": "unavailable", "detail": f"database at {current}, code expects {migrations.head_revision()}"}, 503)
        return JSONResponse({"status": "ready"})

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

    app.add_middleware(BodyLimit, settings=settings)
    app.add_middleware(ApiKeyAuth, settings=settings)
    if settings.cors_origins:  # outermost: preflights carry no key, and a 401 must still be readable by the page
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins, allow_credentials=False,
            allow_methods=sorted({m for _, methods in route_methods(app) for m in methods}),
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
        )
    return app
