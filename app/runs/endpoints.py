import asyncio
import json
from contextlib import AsyncExitStack
from typing import Annotated

import anyio
from fastapi import APIRouter, Header, Path, Query, Request, Response, status
from fastapi.encoders import jsonable_encoder
from fastapi.responses import StreamingResponse

from app.backends.specs import delete_local_files, model_name
from app.core import ServicesDep
from app.events import service as events
from app.events.endpoints import EventsCursor, LastEventId, event_stream, page_or_none, stream_responses
from app.events.schemas import DeliveryList
from app.kit import conditional
from app.kit.conditional import NOT_MODIFIED, IfNoneMatch
from app.kit.db import Database
from app.kit.deps import BODY_ERRORS, NOT_FOUND, DatabaseDep, ErrorOut, ReadSession, SettingsDep, TenantDep
from app.kit.errors import Conflict, NotFound
from app.kit.pages import cursor_params
from app.knowledge_graph import service as graph_service
from app.knowledge_graph import upload
from app.knowledge_graph.schemas import GraphReplaced, GraphSummary
from app.knowledge_graph.service import GraphsDep
from app.learned import store as policy_store
from app.outcomes import service as outcomes
from app.outcomes.endpoints import RepliesCursor
from app.outcomes.meaning import InterestScale
from app.outcomes.schemas import ReplyList, RunOutcomes
from app.runs import queue, repository, service, transitions
from app.runs.events import CATALOGUE, EventList
from app.runs.models import Run
from app.runs.schemas import (
    IterationDetail,
    IterationList,
    IterationOut,
    JudgeList,
    LearnLoopRequest,
    NodeScoresOut,
    RunCreated,
    RunList,
    RunOut,
)
from app.runs.status import RunStatus

router = APIRouter(tags=["runs"])
# A graph's replacement and deletion, which the runs on it hold back: served here, where the runs are counted.
graphs_router = APIRouter(prefix="/graphs", tags=["knowledge graphs"])
GRAPH_IN_USE = {409: {"model": ErrorOut, "description": "The graph is in use by a run, or is shared and cannot be changed"}}
MAX_ITERATION = 2**31 - 1  # iteration numbers are 32-bit integers in the database
IterationNumber = Path(ge=0, le=MAX_ITERATION, description="0 is the baseline.")
CONFLICT = {409: {"model": ErrorOut, "description": "The run's state does not allow it"}}
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}


@router.post(
    "/learn-loop", response_model=RunCreated, status_code=status.HTTP_202_ACCEPTED, summary="Start a learning loop",
    responses={200: {"model": RunCreated, "description": "Replay of an earlier request with the same Idempotency-Key"},
               409: {"model": ErrorOut, "description": "Idempotency-Key reused with a different body"},
               429: {"model": ErrorOut, "headers": RETRY_AFTER,
                     "description": "The tenant has MAX_ACTIVE_RUNS_PER_TENANT runs queued or running"}, **BODY_ERRORS},
)
async def create_learn_loop(
    body: LearnLoopRequest, response: Response, svc: ServicesDep, tenant: TenantDep,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=255)] = None,
) -> RunCreated:
    """Queues a run that trains on the graph's scenarios and publishes an email per iteration."""
    created, replayed = await service.create_run(svc, body, idempotency_key, tenant)
    if replayed:
        response.status_code = status.HTTP_200_OK
    return created


@router.get("/judges", response_model=JudgeList, summary="Judges a run may name")
async def list_judges(svc: ServicesDep, tenant: TenantDep) -> dict:
    """Each judge's name and litellm model string; `default` (the JUDGE_MODEL judge) is a run's when it names none."""
    settings = svc.settings
    models = {"default": settings.judge_model, "embedded": "embedded"} | {n: j.model for n, j in settings.judges.items()}
    return {"data": [{"name": name, "model": model} for name, model in models.items()]}


async def _run_or_404(session, run_id: str, tenant: str) -> Run:
    run = await repository.owned_run(session, run_id, tenant)
    if run is None:
        raise NotFound(f"run {run_id!r} not found")
    return run


RunsCursor = cursor_params(Annotated[str | None, Query(max_length=64, description="A run id: the page starts after it.")],
                           default_limit=20, max_limit=100)


RENDERED = conditional.Rendered(max_bytes=32 * 1024 * 1024)  # answers by the version they show, serialised


def _json(body: bytes, tag: str) -> Response:
    response = Response(body, media_type="application/json")
    conditional.tag(response, tag)
    return response


@router.get("/runs", response_model=RunList, summary="List runs, newest first", responses=NOT_MODIFIED)
async def list_runs(tenant: TenantDep, db: DatabaseDep, page: RunsCursor, status: RunStatus | None = None,
                    if_none_match: IfNoneMatch = None) -> Response:
    """Cursor-paginated, optionally filtered by status. Poll with `If-None-Match`: 304 while no listed run changed."""
    versions = await repository.runs_page_versions(db, tenant=tenant, limit=page.limit, after=page.after, status=status)
    listed, has_more = versions[:page.limit], len(versions) > page.limit
    tag = conditional.entity_tag(tenant, page.limit, page.after, status, has_more, *listed)
    if conditional.matches(if_none_match, tag):
        return conditional.not_modified(tag)
    body = RENDERED.get((tag, "runs"))
    if body is None:  # the page from each run's view as rendered for its version: a run that moved renders alone
        views = await _rendered_runs(db, [conditional.entity_tag(*version) for version in listed], [v[0] for v in listed])
        body = RENDERED.put((tag, "runs"), b'{"data":[' + b",".join(views) + b'],"has_more":' + _JSON_BOOL[has_more] + b"}")
    return _json(body, tag)


_JSON_BOOL = {True: b"true", False: b"false"}


async def _rendered_runs(db: Database, tags: list[str], run_ids: list[str]) -> list[bytes]:
    """Each run's view as JSON, rendered once per version (`tags`, the runs' own); a run deleted meanwhile is left out."""
    rendered = {run_id: RENDERED.get((tag, "run")) for tag, run_id in zip(tags, run_ids, strict=True)}
    if missing := [run_id for run_id, body in rendered.items() if body is None]:
        views = await repository.run_views(db, missing)
        for tag, run_id in zip(tags, run_ids, strict=True):
            if run_id in views:
                rendered[run_id] = RENDERED.put((tag, "run"), RunOut.model_validate(views[run_id]).model_dump_json().encode())
    return [body for body in rendered.values() if body is not None]


def render_ahead(db: Database) -> None:
    """On PostgreSQL: a run's announced version, if this process has served the run, is rendered before the process
    answers with it, so a poll waits for the database only for a run it has not served yet. So is its iterations
    list, if this process rendered it at the version before: it shares the run's tag, so every change of the run
    (an event, say) would otherwise send its next poll to the database."""
    kept = db.kept(repository.RUN_VERSIONS)

    async def prepare(run_id: str, row: tuple) -> None:
        tag = conditional.entity_tag(*repository.version(*row))
        await _rendered_runs(db, [tag], [run_id])
        served = kept.row(run_id)  # the version the notice replaces, still kept while this runs
        if served is not None and RENDERED.get((conditional.entity_tag(*repository.version(*served)), "iterations")):
            await _rendered_iterations(db, tag, run_id)

    kept.prepare = prepare


async def _run_tag(db: Database, run_id: str, tenant: str) -> str:
    """The tag of the run's current version, shared by its view and its iterations; 404 if not the tenant's.
    Read before the answer it tags, so an answer is never older than its tag."""
    version = await repository.run_version(db, run_id, tenant)
    if version is None:
        raise NotFound(f"run {run_id!r} not found")
    return conditional.entity_tag(*version)


@router.get("/runs/{run_id}", response_model=RunOut, summary="A run", responses={**NOT_MODIFIED, **NOT_FOUND})
async def get_run(tenant: TenantDep, run_id: str, db: DatabaseDep, if_none_match: IfNoneMatch = None) -> Response:
    """Status, effective config, progress and the latest and final emails. Poll with `If-None-Match`: 304 while
    nothing changed."""
    tag = await _run_tag(db, run_id, tenant)
    if conditional.matches(if_none_match, tag):
        return conditional.not_modified(tag)
    rendered = await _rendered_runs(db, [tag], [run_id])
    if not rendered:  # deleted since the glance
        raise NotFound(f"run {run_id!r} not found")
    return _json(rendered[0], tag)


async def _transition(svc: ServicesDep, run_id: str, tenant: str, change) -> Run:
    """Applies a status change to the tenant's run in its own transaction (refusals are 404 and 409)."""
    async with svc.db.transaction() as session:
        await _run_or_404(session, run_id, tenant)
        return await change(session, run_id)


@router.post("/runs/{run_id}/cancel", response_model=RunOut, status_code=status.HTTP_202_ACCEPTED, summary="Cancel a run",
             responses={**CONFLICT, **NOT_FOUND})
async def cancel_run(tenant: TenantDep, run_id: str, svc: ServicesDep) -> dict:
    """The run stops at its next step boundary; an iteration in flight is not recorded."""
    run = await _transition(svc, run_id, tenant, transitions.cancel)
    await queue.cancel(run_id, run.attempt)
    async with svc.db.read() as session:
        return await repository.get_run_view(session, run.id)


@router.post("/runs/{run_id}/resume", response_model=RunOut, status_code=status.HTTP_202_ACCEPTED, summary="Resume a failed run",
             responses={**CONFLICT, **NOT_FOUND})
async def resume_run(tenant: TenantDep, run_id: str, svc: ServicesDep) -> dict:
    """Starts a failed run again from its last recorded iteration (after a backend outage, say)."""
    run = await _transition(svc, run_id, tenant, transitions.resume)
    await queue.enqueue(run.id, run.attempt)
    async with svc.db.read() as session:
        return await repository.get_run_view(session, run.id)


@router.get("/runs/{run_id}/iterations", response_model=IterationList, summary="A run's iterations",
            responses={**NOT_MODIFIED, **NOT_FOUND})
async def list_iterations(tenant: TenantDep, run_id: str, db: DatabaseDep, if_none_match: IfNoneMatch = None) -> Response:
    """Every recorded iteration in order, the baseline (iteration 0) first."""
    tag = await _run_tag(db, run_id, tenant)
    if conditional.matches(if_none_match, tag):
        return conditional.not_modified(tag)
    return _json(await _rendered_iterations(db, tag, run_id), tag)


# Iterations are only ever added, never changed, so a run's list is rendered from the items rendered before and those
# of the iterations recorded since. Kept: the items of iterations 0 to `last` without a gap, in RENDERED under
# (run_id, "items", last), `last` here. Rendered whole, a long run's list cost its whole length each time the run moved
# (2.2 ms of CPU at 59 iterations).
_ITEMS_UNTIL: dict[str, int] = {}
_MAX_ITEMS_RUNS = 100_000  # past it every run's list is rendered whole once more


_RENDERING: dict[str, asyncio.Task[bytes]] = {}  # by tag: a poll and a notice's render-ahead share one render


async def _rendered_iterations(db: Database, tag: str, run_id: str) -> bytes:
    """The run's iterations list as JSON, rendered once per version of the run (`tag`), from the items of the
    iterations rendered before and those recorded since."""
    body = RENDERED.get((tag, "iterations"))
    if body is not None:
        return body
    rendering = _RENDERING.get(tag)
    if rendering is None:
        rendering = _RENDERING[tag] = asyncio.ensure_future(_render_iterations(db, tag, run_id))
        rendering.add_done_callback(lambda _: _RENDERING.pop(tag, None))
    return await asyncio.shield(rendering)  # a poll that gives up leaves the render to the others


async def _render_iterations(db: Database, tag: str, run_id: str) -> bytes:
    known = _ITEMS_UNTIL.get(run_id, -1)
    items = RENDERED.get((run_id, "items", known)) if known >= 0 else b""
    until = known if items is not None else -1  # the items let go of meanwhile: rendered whole once more
    items = items or b""
    rows = await repository.iterations(db, run_id, after=until)
    rendered = [IterationOut.model_validate(row).model_dump_json().encode() for row in rows]
    gapless = next((i for i, row in enumerate(rows) if row["iteration"] != until + 1 + i), len(rows))
    if gapless and _ITEMS_UNTIL.get(run_id, -1) == known:  # not already extended by a render that ran meanwhile
        if len(_ITEMS_UNTIL) >= _MAX_ITEMS_RUNS:
            _ITEMS_UNTIL.clear()
        RENDERED.pop((run_id, "items", known))
        _ITEMS_UNTIL[run_id] = until + gapless
        RENDERED.put((run_id, "items", until + gapless), b",".join(filter(None, [items, *rendered[:gapless]])))
    data = b",".join(filter(None, [items, *rendered]))
    return RENDERED.put((tag, "iterations"), b'{"data":[' + data + b'],"has_more":false}')


@router.get("/runs/{run_id}/iterations/{iteration}", response_model=IterationDetail, summary="One iteration with its trajectories",
            responses={**NOT_MODIFIED, **NOT_FOUND})
async def get_iteration(tenant: TenantDep, run_id: str, iteration: Annotated[int, IterationNumber], db: DatabaseDep,
                        if_none_match: IfNoneMatch = None) -> Response:
    """The iteration with each trajectory's reward, scores, email and turns (older conversations go as the run moves
    on, per TRAJECTORY_RETENTION_ITERATIONS, so its tag is the run's)."""
    tag = await _run_tag(db, run_id, tenant)
    if conditional.matches(if_none_match, tag):
        return conditional.not_modified(tag)
    body = RENDERED.get((tag, iteration))
    if body is None:
        async with db.read() as session:
            detail = await repository.iteration_detail(session, run_id, iteration)
        if detail is None:
            raise NotFound(f"iteration {iteration} of run {run_id!r} not found")
        body = RENDERED.put((tag, iteration), IterationDetail.model_validate(detail).model_dump_json().encode())
    return _json(body, tag)


@router.get("/runs/{run_id}/node-scores", response_model=NodeScoresOut, summary="Every node's score", responses=NOT_FOUND)
async def get_node_scores(
    tenant: TenantDep, run_id: str, session: ReadSession, svc: ServicesDep,
    iteration: Annotated[int | None, Query(
        ge=0, le=MAX_ITERATION, description="Scores right after this iteration; default: the latest.")] = None,
    scenario_id: Annotated[str | None, Query(
        min_length=1, max_length=200, description="One of the run's scenarios: its own scores; default: the geometric mean over the run's scenarios.")] = None,
) -> dict:
    """The score of every node of the run's graph, latest or as of one iteration, for one scenario or the run.

    Scores are learned per scenario; without `scenario_id` each node's score is its geometric mean
    over the run's scenarios (the mean of log-scores).
    """
    run = await _run_or_404(session, run_id, tenant)
    scenario_ids = run.effective_config.scenario_ids
    if scenario_id is not None and scenario_id not in scenario_ids:
        raise NotFound(f"scenario {scenario_id!r} among the scenarios of run {run_id!r} not found")
    graph = await svc.graphs.get(run.graph_id)
    latest = await repository.latest_iteration(session, run_id)
    if iteration is None:
        iteration, scores = latest or 0, await repository.current_scores(session, run_id)
    elif latest is None or iteration > latest:
        raise NotFound(f"iteration {iteration} of run {run_id!r} not found")
    else:
        scores = await repository.scores_after(session, run_id, iteration)
    moved = scores.of(scenario_id) if scenario_id is not None else scores.mean(scenario_ids)
    return {"iteration": iteration, "scenario_id": scenario_id, "scores": repository.full_scores(graph, moved)}


EVENT_STREAM = stream_responses(
    'event: run.started\ndata: {"run_id":"run_…","seq":1,"status":"running","attempt":1}\nid: 1\n\n', "the run is finished")


@router.get("/runs/{run_id}/events", response_model=EventList, summary="A run's events, in order; live with Accept: text/event-stream",
            responses={**EVENT_STREAM, **NOT_FOUND})
async def list_events(tenant: TenantDep, run_id: str, request: Request, svc: ServicesDep, page: EventsCursor,
                      last_event_id: LastEventId = None):
    """Events in seq order; their data is exactly what the run's webhook receives.

    With `Accept: text/event-stream` the events stream live as Server-Sent Events as they commit:
    `id` is the event's seq, `event` its type and `data` exactly its `data` JSON. A new connection
    starts at the run's first event (or after `after`); reconnecting with `Last-Event-ID` resumes
    right after that seq, without gaps or duplicates. A `: ping` comment every 15 s keeps idle
    connections open, and the stream ends after a terminal event (`run.succeeded`, `run.failed`,
    `run.cancelled`). A finished run's stream ends once it has given the run's events;
    reconnecting with nothing new answers 204, which tells a browser's EventSource to stop. Other
    Accept values get a JSON page.
    """
    after = page.after if last_event_id is None else last_event_id
    async with svc.db.read() as session:  # closed before streaming: the run's one poller feeds every stream
        run = await _run_or_404(session, run_id, tenant)
        listed = await page_or_none(session, request, repository.subject(run), after, page.limit)
    if listed is not None:
        return listed
    return event_stream(svc.feed, CATALOGUE, repository.subject(run), after=after,
                        until=run.last_seq if run.status.terminal else None)


@router.get("/runs/{run_id}/webhook-deliveries", response_model=DeliveryList, summary="Delivery log of a run's webhooks",
            responses=NOT_FOUND, tags=["webhooks"])
async def list_webhook_deliveries(tenant: TenantDep, run_id: str, session: ReadSession) -> dict:
    """Each event's delivery to the run's receiver: status, the last answer, and every attempt.

    `attempts_log` lists each attempt: when it started, the status code or error, and how long it
    took (at most `WEBHOOK_TIMEOUT_S`, the deadline of the whole request).
    """
    run = await _run_or_404(session, run_id, tenant)
    deliveries = await events.deliveries(session, repository.subject(run))
    attempts = await events.attempts(session, repository.subject(run))
    return {"data": [
        {"event_id": delivery.event_id, "type": delivery.type, "attempts": delivery.attempts, "status": delivery.status,
         "last_status_code": delivery.last_status_code, "last_error": delivery.last_error,
         "next_attempt_at": delivery.next_attempt_at,
         "attempts_log": [{"attempt": a.attempt, "at": a.created_at, "status_code": a.status_code, "error": a.error,
                           "duration_ms": a.duration_ms} for a in attempts.get(delivery.event_id, [])]}
        for delivery in deliveries
    ]}


@router.delete("/runs/{run_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a finished run",
               responses={**CONFLICT, **NOT_FOUND})
async def delete_run(tenant: TenantDep, run_id: str, svc: ServicesDep) -> Response:
    """Removes a finished run's history (iterations, trajectories, scores, events, webhook deliveries, its own
    emails' refs and outcomes, checkpoints) in one transaction, then ART's folder for it on this machine (its logged
    conversations) unless a kept policy's checkpoint is in it. Its kept policies stay (deployed, drafted with, evaluated,
    forked or kept with `POST /policies`), with the drafts written with them. A queued or running run → 409: cancel it
    first."""
    name = model_name(svc.settings, run_id)
    async with svc.db.transaction() as session:
        run = await _run_or_404(session, run_id, tenant)
        if not run.status.terminal:
            raise Conflict(f"run {run_id!r} is {run.status}; cancel it first")
        await repository.delete_run(session, run, name)
        checkpoint_kept = await policy_store.names_checkpoint(session, name)
    if not checkpoint_kept:
        await anyio.to_thread.run_sync(delete_local_files, svc.settings, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


EXPORT = {200: {"content": {"application/x-ndjson": {
    "schema": {"type": "string", "description": "JSON Lines: the run first, then each iteration with its trajectories."}}}},
          503: {"model": ErrorOut, "headers": RETRY_AFTER,
                "description": "No database connection is free: nothing was sent; retry (an export is never cut short)"}}


class _HeldStream(StreamingResponse):
    """A streaming response that lets go of what its body reads from however the response ends
    (finished, the client gone, or never started)."""

    def __init__(self, content, release, **kwargs):
        super().__init__(content, **kwargs)
        self._release = release

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self._release()


@router.get("/runs/{run_id}/export", summary="A run as JSON Lines, for offline analysis", response_class=StreamingResponse,
            responses={**EXPORT, **NOT_FOUND})
async def export_run(tenant: TenantDep, run_id: str, svc: ServicesDep) -> StreamingResponse:
    """One JSON object per line: first `{"type": "run", ...}` (the run with its config), then
    `{"type": "iteration", ...}` for each iteration in order, with its rewards, node score changes
    and trajectories (scenario, reward, judge and feedback scores, email, turns).

    The export reads through one database connection, taken before the answer starts: when none
    is free the answer is a 503 with nothing sent, never a 200 cut short."""
    held = AsyncExitStack()
    session = await held.enter_async_context(svc.db.read())
    try:
        await session.connection()  # the whole export's connection, before the 200
        view = await repository.get_run_view(session, run_id, tenant)
        if view is None:
            raise NotFound(f"run {run_id!r} not found")
        numbers = await repository.iteration_numbers(session, run_id)
    except BaseException:
        await held.aclose()
        raise

    def line(kind: str, data: dict) -> bytes:
        return (json.dumps({"type": kind} | jsonable_encoder(data), separators=(",", ":")) + "\n").encode()

    async def lines():
        yield line("run", view)
        for number in numbers:  # one iteration at a time: a long run is not held in memory
            detail = await repository.iteration_detail(session, run_id, number)
            if detail is not None:
                yield line("iteration", detail)

    return _HeldStream(lines(), held.aclose, media_type="application/x-ndjson",
                       headers={"Content-Disposition": f'attachment; filename="{run_id}.jsonl"'})


@router.get("/runs/{run_id}/outcomes", response_model=RunOutcomes, summary="What the run's sent emails did",
            responses=NOT_FOUND)
async def get_run_outcomes(tenant: TenantDep, run_id: str, session: ReadSession, settings: SettingsDep) -> RunOutcomes:
    """Per email with any outcome: counts of distinct recipients, open and reply rates over delivered (human opens
    only), the reply rate's 95 % interval and the judge's score; and how well the judge's ranking matched replies."""
    await _run_or_404(session, run_id, tenant)
    return await outcomes.run_outcomes(session, run_id, InterestScale.of(settings.reply_interest))


@router.get("/runs/{run_id}/replies", response_model=ReplyList, summary="Replies to the run's emails",
            responses=NOT_FOUND)
async def list_run_replies(tenant: TenantDep, run_id: str, session: ReadSession, settings: SettingsDep,
                           page: RepliesCursor) -> dict:
    """Oldest first: each reply's iteration, category (relabel with `PATCH /replies/{id}`), confidence, who decided
    it, when it came, an out-of-office's return date, and its own text only with STORE_REPLY_TEXT."""
    await _run_or_404(session, run_id, tenant)
    data, more = await outcomes.replies_page(session, settings, tenant, run_id=run_id, after=page.after, limit=page.limit)
    return {"data": data, "has_more": more}


@graphs_router.put("/{graph_id}", response_model=GraphReplaced, summary="Replace a knowledge graph",
                   responses={**GRAPH_IN_USE, **NOT_FOUND, **BODY_ERRORS, **upload.INVALID}, openapi_extra=upload.BODY)
async def replace_graph(
    tenant: TenantDep, graph_id: str, request: Request, db: DatabaseDep, settings: SettingsDep, graphs: GraphsDep,
) -> GraphReplaced:
    """Validated as an upload; the document's `id` must be the path's. Refused (409) while a run on
    the graph is queued or running. Finished runs keep their records; their node scores cover the
    new graph's nodes (a node that vanished is no longer listed). `affects` names each deployed policy whose
    training scenarios the new document no longer has."""
    async with db.read() as session:  # before reading the body: a refusal costs no parsing
        await graph_service.require_changeable(session, graph_id, tenant)
    document = await upload.read_upload(request, settings, path_id=graph_id)
    async with db.transaction() as session:
        affects = await service.replace_graph(session, document, tenant)
    graphs.invalidate(graph_id)
    return GraphReplaced(**GraphSummary.of(document).model_dump(), affects=affects)


@graphs_router.delete("/{graph_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete a knowledge graph",
                      responses={**GRAPH_IN_USE, **NOT_FOUND})
async def delete_graph(tenant: TenantDep, graph_id: str, db: DatabaseDep, graphs: GraphsDep) -> Response:
    """Refused (409) while any run, finished or not, refers to the graph (delete those runs first),
    and for the shared demo graph."""
    async with db.transaction() as session:
        await service.delete_graph(session, graph_id, tenant)
    graphs.invalidate(graph_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
