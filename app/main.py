"""The FastAPI application: each domain's routers, the HTTP edge's middleware and error handlers, and the lifespan."""

import asyncio
import importlib
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI
from starlette.middleware.cors import CORSMiddleware

from app.drafts.endpoints import router as drafts_router
from app.drafts.events import CATALOGUE as BATCH_EVENTS
from app.evaluations.endpoints import router as evaluations_router
from app.events.endpoints import document_webhooks
from app.http import errors
from app.http.health import router as health_router
from app.http.middleware import BodyLimit, StrictInput
from app.kit import docs
from app.kit.auth import ApiKeyAuth, parse_api_keys
from app.kit.deps import UNAUTHORIZED, api_key_scheme, reject_unknown_query_params
from app.kit.settings import Settings, get_settings
from app.kit.worker_process import WorkerProcess
from app.knowledge_graph.endpoints import router as graphs_router
from app.lifecycle import api as lifecycle
from app.outcomes.endpoints import hooks as outcome_hooks
from app.outcomes.endpoints import router as outcomes_router
from app.policies.endpoints import router as policies_router
from app.policies.events import CATALOGUE as GRAPH_EVENTS
from app.runs.endpoints import graphs_router as graph_changes_router
from app.runs.endpoints import render_ahead
from app.runs.endpoints import router as runs_router
from app.runs.events import CATALOGUE as RUN_EVENTS
from app.ui.endpoints import router as ui_router

PUBLIC = frozenset({"/healthz", "/readyz", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json", "/", "/ui"})
PUBLIC_PREFIXES = (docs.STATIC_PATH + "/", "/ui/", "/outcomes/hooks/")  # StaticFiles refuses paths that escape its folder


def create_app(settings: Settings | None = None, *, worker_process: bool = False) -> FastAPI:
    """The API; with RUN_WORKER, runs are worked on in this process, or with `worker_process` (what `codreamer serve`
    does) in a child process that the lifespan starts, restarts if it dies, and stops."""
    settings = settings or get_settings()
    separate = settings.run_worker and worker_process

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        # With a child, that is the worker of EXECUTOR_ID, which recovers that id's runs; the API only enqueues.
        # Without one, this process is a worker too: that module is named, not imported, so that nothing the API
        # imports reaches the loop, ART or a workflow (an import-linter contract).
        runner = importlib.import_module("app.lifecycle.worker") if settings.run_worker and not separate else lifecycle
        services = await runner.start(settings)
        app.state.services = services.api
        render_ahead(services.api.db)
        worker = None
        try:
            if separate:
                worker = WorkerProcess(stop_timeout_s=settings.shutdown_drain_s + lifecycle.BACKGROUND_STOP_S + 20)
                services.api.health.append(worker.problem)
            yield
        finally:
            if worker is not None:
                await asyncio.to_thread(worker.stop)
            await runner.stop(services)

    app = FastAPI(
        title="CoDreamer",
        version="0.1.0",
        summary="Reinforcement-learning learning loops for sales emails: generate, judge, GRPO, KG reweighting.",
        lifespan=lifespan,
        docs_url=None,  # app.kit.docs serves both pages with local assets
        redoc_url=None,
        generate_unique_id_function=docs.operation_id,
    )
    secured = {"dependencies": [Depends(api_key_scheme), Depends(reject_unknown_query_params)], "responses": UNAUTHORIZED}
    app.include_router(runs_router, **secured)
    app.include_router(graphs_router, **secured)
    app.include_router(graph_changes_router, **secured)
    app.include_router(outcomes_router, **secured)
    app.include_router(policies_router, **secured)
    app.include_router(drafts_router, **secured)
    app.include_router(evaluations_router, **secured)
    app.include_router(outcome_hooks, dependencies=[Depends(reject_unknown_query_params)])
    document_webhooks(app.webhooks, RUN_EVENTS, GRAPH_EVENTS, BATCH_EVENTS)
    app.include_router(ui_router)  # the dashboard's page and assets are public; its API calls carry the key
    docs.install(app)
    app.include_router(health_router)
    errors.install_handlers(app)

    app.add_middleware(StrictInput, settings=settings)  # inside BodyLimit: it reads the body through the limit
    app.add_middleware(BodyLimit, settings=settings)
    app.add_middleware(ApiKeyAuth, keys=parse_api_keys(settings.api_keys), public=PUBLIC, public_prefixes=PUBLIC_PREFIXES)
    if settings.cors_origins:  # outermost: preflights carry no key, and a 401 must still be readable by the page
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins, allow_credentials=False,
            allow_methods=sorted({m for _, methods in errors.route_methods(app) for m in methods}),
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
        )
    return app
