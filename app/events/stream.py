"""A subject's events (a run's, a graph's, a draft batch's), live, as Server-Sent Events.

Every stream of a subject in a process is fed by one poller: it reads the events table (each
poll in its own short read session, so it works when the events are written in another process,
a worker on PostgreSQL) and fans the events out to all of them. However many clients follow a
subject, it costs one query per poll and at most one pooled connection, and a stream never
touches the database itself: a busy pool delays a poll (retried), it never cuts a stream. The SSE `id` is
the event's `seq`: a client that reconnects with `Last-Event-ID` resumes exactly after the
last event it saw, without gaps or duplicates.
"""

import asyncio
import bisect
import logging
import time
from collections.abc import AsyncIterator

import anyio
from fastapi.sse import ServerSentEvent, format_sse_event

from app.events.models import Event
from app.events.schemas import Catalogue, Subject
from app.events.service import events_page
from app.kit.db import Database, describe

log = logging.getLogger(__name__)
POLL_INTERVAL_S = 0.5
KEEPALIVE_S = 15.0
PAGE_SIZE = 100
RETRY_S = 1.0
"""Pause after a failed poll (the database busy or away) before the next try."""


class _Cursor:
    """One stream's position: the seq of the last event it was given."""

    def __init__(self, after: int):
        self.after = after


class _SubjectPoller:
    """Polls one subject's events while any stream follows it, holding those not every stream has passed."""

    def __init__(self, db: Database, subject: Subject, poll_interval: float):
        self.db, self.subject, self.poll_interval = db, subject, poll_interval
        self.cursors: set[_Cursor] = set()
        self.base = 0  # the log holds every event after this seq (that exists), in order
        self.log: list[Event] = []
        self.changed = asyncio.Event()  # replaced after each poll that brought news
        self.wake = asyncio.Event()
        self.task: asyncio.Task | None = None

    def since(self, after: int) -> list[Event] | None:
        """The held events after `after`; None while the log does not reach back that far."""
        if after < self.base:
            return None
        return self.log[bisect.bisect_right(self.log, after, key=lambda event: event.seq):]

    async def run(self, done) -> None:
        try:
            while self.cursors:
                try:
                    await self._poll()
                except Exception as exc:  # a busy or lost database delays the streams, never ends them
                    log.warning("polling the events of %s %s failed (%s); retrying", self.subject.kind, self.subject.id,
                                describe(exc))
                    await asyncio.sleep(RETRY_S)
                    continue
                self.wake.clear()
                try:
                    await asyncio.wait_for(self.wake.wait(), self.poll_interval)
                except TimeoutError:
                    pass
        finally:
            done(self)

    async def _poll(self) -> None:
        low = min(cursor.after for cursor in self.cursors)
        back = low < self.base  # a stream joined behind the log: read from its cursor, replacing the log
        after = low if back else (self.log[-1].seq if self.log else self.base)
        fetched, has_more = [], True
        with anyio.CancelScope(shield=True):  # a stop mid-query must not cut a pooled connection
            async with self.db.read() as session:
                while has_more:
                    page, has_more = await events_page(session, self.subject, after=after, limit=PAGE_SIZE)
                    fetched += page
                    after = page[-1].seq if page else after
        if back:
            self.base, self.log = low, fetched
        else:
            self.log += fetched
        passed = min((cursor.after for cursor in self.cursors), default=self.base)  # given to every stream: it can go
        if passed > self.base:
            del self.log[:bisect.bisect_right(self.log, passed, key=lambda event: event.seq)]
            self.base = passed
        if fetched or back:
            self.changed.set()
            self.changed = asyncio.Event()


class EventFeed:
    """The live events of every subject streamed by this process: one poller per subject, shared by its streams."""

    def __init__(self, db: Database, *, poll_interval: float = POLL_INTERVAL_S):
        self.db, self.poll_interval = db, poll_interval
        self._pollers: dict[Subject, _SubjectPoller] = {}

    async def follow(self, catalogue: Catalogue, subject: Subject, *, after: int = 0, until: int | None = None,
                     keepalive: float = KEEPALIVE_S) -> AsyncIterator[ServerSentEvent]:
        """The subject's events with a larger seq than `after`, as they commit; ends after a terminal event and those
        already committed behind it, or once it has given `until` (a subject that ended before the stream started:
        its later events are news for the next connection, or the webhook). A subject without terminal events (a
        graph) streams until the client leaves.

        While nothing happens, a comment every `keepalive` seconds keeps proxies from closing the connection.
        """
        cursor = _Cursor(after)
        poller = self._join(subject, cursor)
        try:
            quiet_since = time.monotonic()
            ended = False
            while True:
                changed = poller.changed
                for event in poller.since(cursor.after) or ():
                    cursor.after = event.seq
                    yield ServerSentEvent(id=str(event.seq), event=event.type,
                                          raw_data=catalogue.data_json(event.type, event.data))
                    ended = ended or event.type in catalogue.terminal
                    quiet_since = time.monotonic()
                if ended or (until is not None and cursor.after >= until):
                    return
                if changed is not poller.changed:
                    continue  # news arrived while this stream was sending
                try:
                    await asyncio.wait_for(changed.wait(), max(0.0, quiet_since + keepalive - time.monotonic()))
                except TimeoutError:
                    yield ServerSentEvent(comment="ping")
                    quiet_since = time.monotonic()
        finally:
            poller.cursors.discard(cursor)
            poller.wake.set()  # the poller stops once its last stream has left

    def _join(self, subject: Subject, cursor: _Cursor) -> _SubjectPoller:
        poller = self._pollers.get(subject)
        if poller is None:
            poller = self._pollers[subject] = _SubjectPoller(self.db, subject, self.poll_interval)
            poller.base = cursor.after
            poller.task = asyncio.create_task(poller.run(self._forget))
        poller.cursors.add(cursor)
        poller.wake.set()  # a new stream gets its first events without waiting for the next poll
        return poller

    def _forget(self, poller: _SubjectPoller) -> None:
        if self._pollers.get(poller.subject) is poller:
            del self._pollers[poller.subject]

    async def close(self) -> None:
        """Stops every poller (at shutdown, before the engine is disposed)."""
        tasks = [poller.task for poller in self._pollers.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


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
