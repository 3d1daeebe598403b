from typing import Annotated

from fastapi import APIRouter, Header, HTTPException, Query, Response, status
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import IntegrityError

from pydantic import ValidationError

from app.backends.registry import SPECS, BackendUnavailable, check_available
from app.deps import NOT_FOUND, BODY_ERRORS, ErrorOut, ReadSession, ServicesDep, not_found
from app.runs import service, workflow
from app.runs.models import IdempotencyKey, Run
from app.runs.schemas import (
    EventList, IterationDetail, IterationList, LearnLoopRequest, NodeScoresOut, RunCreated, RunList, RunOut, RunStatus,
)
from app.webhooks.signing import new_secret
from app.webhooks.ssrf import UnsafeWebhookURL, resolve

router = APIRouter(tags=["runs"])


def invalid(field: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": ("body", field), "msg": message, "type": "value_error"}])


def links(run_id: str) -> dict:
    base = f"/runs/{run_id}"
    return {"self": base, "iterations": f"{base}/iterations", "events": f"{base}/events", "node_scores": f"{base}/node-scores"}


async def effective_config(svc: ServicesDep, body: LearnLoopRequest) -> dict:
    """Every field with its effective value, or a 422 naming the field that is wrong."""
    graph = await svc.graphs.get(body.graph_id)
    if graph is None:
        raise invalid("graph_id", f"unknown graph {body.graph_id!r}; see GET /graphs")
    scenario_ids = body.scenario_ids or list(graph.scenarios)
    unknown = [s for s in scenario_ids if s not in graph.scenarios]
    if unknown:
        raise invalid("scenario_ids", f"unknown scenario ids for graph {graph.id!r}: {unknown}")
    if len(set(scenario_ids)) != len(scenario_ids):
        raise invalid("scenario_ids", "scenario ids must be unique")
    target = body.target_scenario_id or scenario_ids[0]
    if target not in graph.scenarios:
        raise invalid("target_scenario_id", f"unknown scenario {target!r} for graph {graph.id!r}")
    backend = body.backend or svc.settings.model_backend
    spec = SPECS[backend]
    try:
        check_available(backend, svc.settings)
    except BackendUnavailable as exc:
        raise invalid("backend", str(exc)) from None
    if body.learning_rate is not None and not spec.trainable:
        raise invalid("learning_rate", f"backend {backend!r} serves a fixed model and does not train; remove learning_rate")
    try:
        train_options = spec.options.model_validate(body.train_options or {}).model_dump()
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", "train_options", *e["loc"]), "msg": f"{e['msg']} (backend {backend!r})"} for e in exc.errors(include_url=False)]
        ) from None
    webhook_url = str(body.webhook_url) if body.webhook_url else None
    if webhook_url:
        try:
            await resolve(webhook_url, allow_private=svc.settings.webhook_allow_private)
        except UnsafeWebhookURL as exc:
            raise invalid("webhook_url", str(exc)) from None
    return body.model_dump(mode="json") | {
        "scenario_ids": scenario_ids, "target_scenario_id": target, "backend": backend, "webhook_url": webhook_url,
        "learning_rate": body.learning_rate or spec.default_learning_rate, "train_options": train_options,
    }


@router.post(
    "/learn-loop", response_model=RunCreated, status_code=status.HTTP_202_ACCEPTED, summary="Start a learning loop",
    responses={200: {"model": RunCreated, "description": "Replay of an earlier request with the same Idempotency-Key"},
               409: {"model": ErrorOut, "description": "Idempotency-Key reused with a different body"}, **BODY_ERRORS},
)
async def start_learn_loop(
    body: LearnLoopRequest, response: Response, svc: ServicesDep,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=255)] = None,
) -> dict:
    body_hash = service.request_hash(body.model_dump(mode="json", exclude_unset=True))
    if idempotency_key:
        async with svc.db.read() as session:
            existing = await _replay(session, idempotency_key, body_hash)
        if existing is not None:
            response.status_code = status.HTTP_200_OK
            return existing
    config = await effective_config(svc, body)
    run = Run(
        id=service.new_id("run"), status="queued", graph_id=config["graph_id"], config=config,
        iterations_total=config["iterations"], webhook_url=config["webhook_url"],
        webhook_secret=new_secret() if config["webhook_url"] else None,
    )
    try:
        async with svc.db.transaction() as session:
            session.add(run)
            if idempotency_key:
                await session.flush()
                session.add(IdempotencyKey(key=idempotency_key, request_hash=body_hash, run_id=run.id))
    except IntegrityError:  # a concurrent request with the same key won the race
        async with svc.db.read() as session:
            existing = await _replay(session, idempotency_key, body_hash)
        response.status_code = status.HTTP_200_OK
        return existing
    await workflow.enqueue(run.id)
    return {"run_id": run.id, "status": run.status, "webhook_secret": run.webhook_secret, "links": links(run.id)}


async def _replay(session, key: str, body_hash: str) -> dict | None:
    try:
        run = await service.find_idempotent(session, key, body_hash)
    except service.Conflict as exc:
        raise HTTPException(409, str(exc)) from None
    if run is None:
        return None
    return {"run_id": run.id, "status": run.status, "webhook_secret": run.webhook_secret, "links": links(run.id)}


async def _run_or_404(session, run_id: str) -> Run:
    run = await session.get(Run, run_id)
    if run is None:
        raise not_found(f"run {run_id!r}")
    return run


@router.get("/runs", response_model=RunList, summary="List runs, newest first")
async def list_runs(
    session: ReadSession,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    after: Annotated[str | None, Query(max_length=64, description="A run id: the page starts after it.")] = None,
    status: RunStatus | None = None,
) -> dict:
    runs, has_more = await service.list_runs(session, limit=limit, after=after, status=status)
    return {"data": runs, "has_more": has_more}


@router.get("/runs/{run_id}", response_model=RunOut, summary="A run", responses=NOT_FOUND)
async def get_run(run_id: str, session: ReadSession) -> dict:
    view = await service.get_run_view(session, run_id)
    if view is None:
        raise not_found(f"run {run_id!r}")
    return view


async def _transition(svc: ServicesDep, run_id: str, change) -> Run:
    """Applies a status change in its own transaction, mapping its refusals to 404 and 409."""
    try:
        async with svc.db.transaction() as session:
            return await change(session, run_id)
    except LookupError:
        raise not_found(f"run {run_id!r}") from None
    except service.Conflict as exc:
        raise HTTPException(409, str(exc)) from None


@router.post("/runs/{run_id}/cancel", response_model=RunOut, status_code=status.HTTP_202_ACCEPTED, summary="Cancel a run",
             responses={409: {"model": ErrorOut, "description": "The run already finished"}, **NOT_FOUND})
async def cancel_run(run_id: str, svc: ServicesDep) -> dict:
    """The run stops at its next step boundary; an iteration in flight is not recorded."""
    run = await _transition(svc, run_id, service.cancel)
    if svc.relay is not None:
        svc.relay.wake()
    await workflow.cancel(run_id, run.attempt)
    async with svc.db.read() as session:
        return await service.get_run_view(session, run.id)


@router.post("/runs/{run_id}/resume", response_model=RunOut, status_code=status.HTTP_202_ACCEPTED, summary="Resume a failed run",
             responses={409: {"model": ErrorOut, "description": "The run has not failed"}, **NOT_FOUND})
async def resume_run(run_id: str, svc: ServicesDep) -> dict:
    """Starts a failed run again from its last recorded iteration (after a backend outage, say)."""
    run = await _transition(svc, run_id, service.resume)
    await workflow.enqueue(run.id, run.attempt)
    async with svc.db.read() as session:
        return await service.get_run_view(session, run.id)


@router.get("/runs/{run_id}/iterations", response_model=IterationList, summary="A run's iterations", responses=NOT_FOUND)
async def list_iterations(run_id: str, session: ReadSession) -> dict:
    await _run_or_404(session, run_id)
    return {"data": await service.iterations(session, run_id)}


@router.get("/runs/{run_id}/iterations/{iteration}", response_model=IterationDetail, summary="One iteration with its trajectories",
            responses=NOT_FOUND)
async def get_iteration(run_id: str, iteration: int, session: ReadSession) -> dict:
    await _run_or_404(session, run_id)
    detail = await service.iteration_detail(session, run_id, iteration)
    if detail is None:
        raise not_found(f"iteration {iteration} of run {run_id!r}")
    return detail


@router.get("/runs/{run_id}/node-scores", response_model=NodeScoresOut, summary="Every node's score", responses=NOT_FOUND)
async def node_scores(
    run_id: str, session: ReadSession, svc: ServicesDep,
    iteration: Annotated[int | None, Query(ge=0, description="Scores right after this iteration; default: the latest.")] = None,
) -> dict:
    run = await _run_or_404(session, run_id)
    graph = await svc.graphs.get(run.graph_id)
    latest = await service.latest_iteration(session, run_id)
    if iteration is None:
        return {"iteration": latest or 0, "scores": service.full_scores(graph, await service.current_scores(session, run_id))}
    if latest is None or iteration > latest:
        raise not_found(f"iteration {iteration} of run {run_id!r}")
    return {"iteration": iteration, "scores": service.full_scores(graph, await service.scores_after(session, run_id, iteration))}


@router.get("/runs/{run_id}/events", response_model=EventList, summary="A run's events, in order", responses=NOT_FOUND)
async def list_events(
    run_id: str, session: ReadSession,
    after: Annotated[int, Query(ge=0, description="Only events with a larger seq.")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict:
    await _run_or_404(session, run_id)
    events, has_more = await service.events_page(session, run_id, after=after, limit=limit)
    return {"data": events, "has_more": has_more}
