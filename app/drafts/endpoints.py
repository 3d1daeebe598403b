"""Draft batches: thin routes over `app.drafts.service`."""

from typing import Annotated

from fastapi import APIRouter, Header, Path, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from app.core import ServicesDep
from app.drafts import service
from app.drafts.csv_files import Layout
from app.drafts.events import CATALOGUE, BatchEventList
from app.drafts.schemas import ENDED, BatchCreated, BatchOut, BatchOutcomes, BatchPage, DraftPage, DraftRequest
from app.events import service as events
from app.events.endpoints import EventsCursor, LastEventId, event_stream, page_or_none, stream_responses
from app.kit.deps import BODY_ERRORS, NOT_FOUND, ErrorOut, ReadSession, TenantDep
from app.kit.docs import inline_refs
from app.kit.errors import invalid
from app.kit.pages import cursor_params
from app.outcomes import service as outcomes
from app.outcomes.endpoints import RepliesCursor
from app.outcomes.schemas import ReplyList

router = APIRouter(tags=["drafts"])
CONFLICT = {409: {"model": ErrorOut, "description": "The batch's status refuses it"}}
TOO_MANY = {429: {"model": ErrorOut, "description": "The tenant has MAX_ACTIVE_DRAFT_BATCHES_PER_TENANT batches queued "
                                                    "or running", "headers": {"Retry-After": {
    "description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}}}
BatchId = Annotated[str, Path(min_length=1, max_length=40)]
PositionCursor = cursor_params(Annotated[int, Query(ge=-1, le=10_000, description="A position: the page starts after it.")],
                               first=-1, default_limit=100, max_limit=1000)
BatchCursor = cursor_params(Annotated[str | None, Query(max_length=40, description="A batch id: the page starts after it.")],
                            default_limit=20, max_limit=100)
CsvLayout = Annotated[Layout, Query(description="With Accept: text/csv, whose column names: `instantly`, `smartlead` and "
                                                "`lemlist` use those tools' documented lead fields.")]
CsvColumns = Annotated[str | None, Query(max_length=2000, description=(
    "With Accept: text/csv, the columns to write, comma-separated, in that order (names as in the layout)."))]
FORM_FIELDS = ("graph_id", "policy", "goal", "webhook_url", "seed")
BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": inline_refs(DraftRequest.model_json_schema())},
    "multipart/form-data": {"schema": {"type": "object", "required": ["graph_id", "file"], "properties": {
        "file": {"type": "string", "format": "binary",
                 "description": "CSV as a sales tool exports it, with a header row: first_name,last_name (or name),email,"
                                "company (or company_name),title (or role),industry,pains,goal; pains separated by ;, "
                                "other columns kept as custom fields; , or ; or tab separated; UTF-8 or Windows-1252"},
        **{name: {"type": "string"} for name in FORM_FIELDS}}}}}}}


def _no_nul(form) -> None:
    """No database text column takes NUL (PostgreSQL refuses it): a form field, name or file name carrying one is a
    422 naming it, on every database alike."""
    for name, value in form.multi_items():
        text = value if isinstance(value, str) else value.filename or ""
        if "\x00" in name or "\x00" in text:
            raise invalid(name.replace("\x00", "\\x00"), "a form field's name or value carries a NUL character")


async def _request(request: Request) -> DraftRequest:
    """The JSON body, or the form with its CSV file; either is validated as a DraftRequest (422 naming the field)."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("multipart/form-data"):
        form = await request.form()
        _no_nul(form)
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise invalid("file", "a multipart request carries the prospects as a CSV `file`")
        fields = {name: form[name] for name in FORM_FIELDS if isinstance(form.get(name), str) and form[name].strip()}
        fields["prospects"] = service.prospects_from_csv(await upload.read())
    else:
        try:
            fields = await request.json()
        except ValueError:
            raise invalid(None, "the body is neither JSON nor multipart/form-data with a CSV file") from None
    try:
        return DraftRequest.model_validate(fields)
    except ValidationError as exc:
        raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]) from None


@router.post("/drafts", response_model=BatchCreated, status_code=status.HTTP_202_ACCEPTED, summary="Draft emails for prospects",
             responses={200: {"model": BatchCreated, "description": "Replay of an earlier request with the same Idempotency-Key"},
                        409: {"model": ErrorOut, "description": "Idempotency-Key reused with a different body"},
                        **TOO_MANY, **BODY_ERRORS}, openapi_extra=BODY)
async def create_drafts(request: Request, response: Response, svc: ServicesDep, tenant: TenantDep,
                        idempotency_key: Annotated[str | None, Header(min_length=1, max_length=255)] = None) -> BatchCreated:
    """One email per prospect, written with the policy (default: the graph's deployment) by the workers, durably.
    Each prospect inherits the node scores and lessons learned for the training scenario it is most like."""
    created, replayed = await service.create_batch(svc, await _request(request), tenant, idempotency_key)
    if replayed:
        response.status_code = status.HTTP_200_OK
    return created


@router.get("/draft-batches", response_model=BatchPage, summary="List draft batches")
async def list_draft_batches(session: ReadSession, tenant: TenantDep, page: BatchCursor,
                             graph_id: Annotated[str | None, Query(max_length=200)] = None) -> dict:
    """The tenant's batches, newest first, optionally of one graph (the dashboard's drafts view starts here)."""
    data, has_more = await service.batches_page(session, tenant, graph_id, after=page.after, limit=page.limit)
    return {"data": data, "has_more": has_more}


@router.get("/draft-batches/{batch_id}", response_model=BatchOut, summary="A draft batch", responses=NOT_FOUND)
async def get_draft_batch(batch_id: BatchId, session: ReadSession, tenant: TenantDep) -> BatchOut:
    """Its status and progress: `completed` of `count` prospects drafted."""
    return service.batch_view(await service.batch_of(session, batch_id, tenant))


@router.post("/draft-batches/{batch_id}/cancel", response_model=BatchOut, status_code=status.HTTP_202_ACCEPTED,
             summary="Cancel a draft batch", responses={**CONFLICT, **NOT_FOUND})
async def cancel_draft_batch(batch_id: BatchId, svc: ServicesDep, tenant: TenantDep) -> BatchOut:
    """A queued or running batch ends `cancelled` (event `draft_batch.cancelled`): no prospect is drafted after it,
    the drafts already stored stand. A finished batch → 409."""
    return await service.cancel_batch(svc, batch_id, tenant)


@router.post("/draft-batches/{batch_id}/resume", response_model=BatchOut, status_code=status.HTTP_202_ACCEPTED,
             summary="Resume a failed draft batch", responses={**CONFLICT, **NOT_FOUND, **TOO_MANY})
async def resume_draft_batch(batch_id: BatchId, svc: ServicesDep, tenant: TenantDep) -> BatchOut:
    """A failed batch is queued again and drafts only the prospects it had not drafted; any other status → 409."""
    return await service.resume_batch(svc, batch_id, tenant)


EVENT_STREAM = stream_responses(
    'event: draft_batch.succeeded\ndata: {"batch_id":"drb_…","seq":1,"status":"succeeded","count":2,"completed":2,'
    '"policy":"run_…@3","error":null}\nid: 1\n\n', "the batch is finished")


@router.get("/draft-batches/{batch_id}/events", response_model=BatchEventList,
            summary="A draft batch's events, in order; live with Accept: text/event-stream",
            responses={**EVENT_STREAM, **NOT_FOUND})
async def list_batch_events(batch_id: BatchId, request: Request, svc: ServicesDep, tenant: TenantDep,
                            page: EventsCursor, last_event_id: LastEventId = None):
    """Events in seq order (`draft_batch.succeeded`, `draft_batch.failed` or `draft_batch.cancelled`; a resumed batch
    ends again, with a later seq); their data is exactly what the batch's webhook receives.

    With `Accept: text/event-stream` they stream live as Server-Sent Events, as a run's do: `id` is the seq,
    `Last-Event-ID` resumes after it, a `: ping` comment every 15 s keeps idle connections open, and the stream ends
    after the batch's outcome event. A finished batch's stream ends once it has given its events; reconnecting with
    nothing new answers 204.
    """
    after = page.after if last_event_id is None else last_event_id
    async with svc.db.read() as session:  # closed before streaming: the batch's one poller feeds every stream
        batch = await service.batch_of(session, batch_id, tenant)
        subject = service.subject(batch)
        listed = await page_or_none(session, request, subject, after, page.limit)
        ended = batch.status in ENDED
        until = await events.last_seq(session, subject) if ended and listed is None else None
    if listed is not None:
        return listed
    return event_stream(svc.feed, CATALOGUE, subject, after=after, until=until)


@router.get("/draft-batches/{batch_id}/drafts", response_model=DraftPage, summary="A batch's drafts",
            responses={**NOT_FOUND, 200: {"content": {"text/csv": {"schema": {"type": "string"}}}}})
async def list_drafts(batch_id: BatchId, request: Request, session: ReadSession, tenant: TenantDep,
                      page: PositionCursor, layout: CsvLayout = Layout.CODREAMER, columns: CsvColumns = None
                      ) -> Response | dict:
    """In prospect order (`after` = a position, from 0). With `Accept: text/csv`, all of them as CSV for a sequencer's
    import, in its documented column names with `layout`, or only the `columns` named: the ref and Message-ID are
    custom columns, and so is every custom field of the prospects. A cell that a spreadsheet would read as a formula
    starts with `'`."""
    batch = await service.batch_of(session, batch_id, tenant)
    if "text/csv" in request.headers.get("accept", ""):
        wanted = [name.strip() for name in columns.split(",") if name.strip()] if columns else None
        return Response(await service.drafts_csv(session, batch, layout, wanted), media_type="text/csv; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{batch.id}.csv"'})
    drafts, has_more = await service.drafts_page(session, batch, after=page.after, limit=page.limit)
    return {"data": drafts, "has_more": has_more}


@router.get("/draft-batches/{batch_id}/outcomes", response_model=BatchOutcomes, summary="What the drafts earned",
            responses=NOT_FOUND)
async def get_batch_outcomes(batch_id: BatchId, session: ReadSession, svc: ServicesDep, tenant: TenantDep) -> dict:
    """Per drafted prospect, the distinct recipients that each outcome reached (human opens and clicks only)."""
    return {"data": await service.batch_outcomes(session, await service.batch_of(session, batch_id, tenant),
                                                 svc.settings)}


@router.get("/draft-batches/{batch_id}/replies", response_model=ReplyList, summary="Replies to the batch's drafts",
            responses=NOT_FOUND)
async def list_batch_replies(batch_id: BatchId, session: ReadSession, svc: ServicesDep, tenant: TenantDep,
                             page: RepliesCursor) -> dict:
    """Oldest first: each reply's prospect, category (relabel with `PATCH /replies/{id}`), confidence, who decided it,
    when it came, an out-of-office's return date, and its own text only with STORE_REPLY_TEXT."""
    batch = await service.batch_of(session, batch_id, tenant)
    data, more = await outcomes.replies_page(session, svc.settings, tenant, batch_id=batch.id, after=page.after,
                                             limit=page.limit)
    return {"data": data, "has_more": more}
