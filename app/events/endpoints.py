"""What every subject's events route shares (`GET /runs/{id}/events`, `/graphs/{id}/events`,
`/draft-batches/{id}/events`): the cursor, the `Last-Event-ID` header, the answer as a JSON page or a live stream;
and the webhooks' entries in the OpenAPI document's `webhooks` section."""

from typing import Annotated, Union

from fastapi import APIRouter, Header, Query, Request, Response, status
from fastapi.sse import EventSourceResponse
from sqlalchemy.ext.asyncio import AsyncSession

from app.events import service, stream
from app.events.schemas import Catalogue, Subject
from app.kit.pages import cursor_params

MAX_SEQ = 2**31 - 1  # the seq column is a 32-bit integer on PostgreSQL
EventsCursor = cursor_params(Annotated[int, Query(ge=0, le=MAX_SEQ, description="Only events with a larger seq.")], first=0,
                             default_limit=100, max_limit=1000, limit_help="Page size (JSON only).")
LastEventId = Annotated[int | None, Header(
    alias="Last-Event-ID", ge=0, le=MAX_SEQ, description="The seq of the last event seen; takes precedence over `after`.")]


def stream_responses(example: str, ended: str | None) -> dict:
    """The OpenAPI answers of an events route besides its JSON page: the stream, and for a subject that ends, the 204
    once it has `ended` ("the run is finished") with nothing after the cursor."""
    answers: dict = {200: {"content": {"text/event-stream": {
        "schema": {"type": "string", "description": "Server-Sent Events: `id` = seq, `event` = type, `data` = the event's data (JSON)."},
        "example": example,
    }}}}
    if ended is not None:
        answers[204] = {"description": f"Stream only: {ended} and has no event after the cursor (EventSource stops "
                                       "reconnecting)."}
    return answers


async def page_or_none(session: AsyncSession, request: Request, subject: Subject, after: int, limit: int) -> dict | None:
    """The JSON page of the subject's events, unless the request asks for the stream (None)."""
    if stream.wants_event_stream(request.headers.get("accept")):
        return None
    listed, has_more = await service.events_page(session, subject, after=after, limit=limit)
    return {"data": listed, "has_more": has_more}


def event_stream(feed: stream.EventFeed, catalogue: Catalogue, subject: Subject, *, after: int,
                 until: int | None) -> Response:
    """The live stream after `after`; `until` is the last seq of a subject that has ended (the stream stops there),
    None while it goes on. An ended subject with nothing after the cursor answers 204."""
    if until is not None and until <= after:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return EventSourceResponse(stream.encode(feed.follow(catalogue, subject, after=after, until=until)),
                               headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


DESCRIPTION = (
    "POSTed to the `webhook_url` of the event's subject (a run's, a draft batch's, a graph's deployment's), signed per "
    "Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`). Any non-2xx answer is retried with "
    "backoff; deduplicate on `webhook-id`."
)


def _receiver(model: type) -> object:
    async def receive(body: model) -> None:  # type: ignore[valid-type]
        """Documentation only: the receiver is the caller's server."""

    return receive


WEBHOOK_TAG = "webhook events"  # listed after the API's own tags (app.kit.docs.tag_order)


def document_webhooks(webhooks: APIRouter, *catalogues: Catalogue) -> None:
    """One entry per event type, named by the type (`run.started`), with its webhook body: one of each subject's where
    subjects share a type (`reply.received`, a run's or a draft batch's)."""
    bodies: dict[str, list[type]] = {}
    for catalogue in catalogues:
        for event_type, model in catalogue.webhook_models().items():
            bodies.setdefault(event_type, []).append(model)
    for event_type, found in bodies.items():
        model = found[0] if len(found) == 1 else Union[tuple(found)]  # noqa: UP007
        webhooks.add_api_route(
            event_type, _receiver(model), methods=["POST"], summary=f"{event_type} event",
            description=DESCRIPTION, operation_id=_operation_id(event_type), status_code=200, tags=[WEBHOOK_TAG],
        )


def _operation_id(event_type: str) -> str:
    """`run.started` → `runStartedWebhook`."""
    first, *rest = event_type.replace(".", "_").split("_")
    return first + "".join(part.title() for part in rest) + "Webhook"
