"""A run's events, live, as Server-Sent Events.

The stream polls the events table, each poll in its own short read session, so it works when
the run executes in another process (a worker on PostgreSQL) and never holds a database
connection between polls. The SSE `id` is the event's `seq`: a client that reconnects with
`Last-Event-ID` resumes exactly after the last event it saw, without gaps or duplicates.
"""

import time
from collections.abc import AsyncIterator

import anyio
from fastapi.sse import ServerSentEvent, format_sse_event

from app.db import Database
from app.events.schemas import Catalogue
from app.events.service import events_page

POLL_INTERVAL_S = 0.5
KEEPALIVE_S = 15.0
PAGE_SIZE = 100


async def run_events(
    db: Database, catalogue: Catalogue, run_id: str, *, after: int = 0,
    poll_interval: float = POLL_INTERVAL_S, keepalive: float = KEEPALIVE_S,
) -> AsyncIterator[ServerSentEvent]:
    """The run's events with a larger seq than `after`, as they commit; ends after a terminal event.

    While nothing happens, a comment every `keepalive` seconds keeps proxies from closing the connection.
    """
    quiet_since = time.monotonic()
    while True:
        with anyio.CancelScope(shield=True):  # a client leaving mid-query must not cut a pooled connection
            async with db.read() as session:
                page, has_more = await events_page(session, run_id, after=after, limit=PAGE_SIZE)
        for event in page:
            after = event.seq
            yield ServerSentEvent(id=str(event.seq), event=event.type, raw_data=catalogue.data_json(event.type, event.data))
            if event.type in catalogue.terminal:
                return
        if page:
            quiet_since = time.monotonic()
            if has_more:
                continue
        elif time.monotonic() - quiet_since >= keepalive:
            yield ServerSentEvent(comment="ping")
            quiet_since = time.monotonic()
        await anyio.sleep(poll_interval)


async def encode(events: AsyncIterator[ServerSentEvent]) -> AsyncIterator[bytes]:
    """The wire format, by FastAPI's own SSE encoder (`data` is already JSON text)."""
    async for event in events:
        yield format_sse_event(data_str=event.raw_data, event=event.event, id=event.id, retry=event.retry,
                               comment=event.comment)


def wants_event_stream(accept: str | None) -> bool:
    """True when the Accept header prefers `text/event-stream` to JSON (a wildcard alone means JSON)."""
    quality = {"text/event-stream": 0.0, "application/json": 0.0}
    for item in (accept or "").split(","):
        media_type, *params = (part.strip() for part in item.split(";"))
        if media_type.lower() in quality:
            q = 1.0
            for param in params:
                name, _, value = param.partition("=")
                if name.strip().lower() == "q":
                    try:
                        q = float(value)
                    except ValueError:
                        q = 0.0
            quality[media_type.lower()] = max(quality[media_type.lower()], q)
    return quality["text/event-stream"] > max(quality["application/json"], 0.0)
