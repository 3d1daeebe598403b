"""The outbox relay: delivers pending webhook deliveries, off the learning loop's path.

Every worker runs one. Three rules keep delivery fair and exact:

- **A whole-request deadline.** An attempt (address check, connect, send, the answer)
  gets `WEBHOOK_TIMEOUT_S` in all; a receiver that drips its answer is cut there and the
  attempt is recorded as a timeout. Only the answer's status counts: at most
  `ANSWER_READ_CAP` bytes of its body are read (a short body to its end, so the connection can
  be reused), never a large one, whose connection is closed unread.
- **Fair slots.** A worker has `WEBHOOK_CONCURRENCY` send slots, and a subject (a run, a graph,
  a draft batch) has at most `WEBHOOK_CONCURRENCY_PER_RUN` attempts in flight across all workers
  (each claim records until when it holds its delivery, and workers take turns claiming, under
  one lock). A worker claims only as many due deliveries as it has free slots, round-robin across
  subjects (each subject's oldest due delivery first, then each subject's second, ...), and starts
  each attempt as soon as it is claimed: nothing waits behind a slow receiver, and a slow
  receiver holds at most its subject's slots, each for at most the deadline.
- **A lease that covers the attempt.** A claim is a conditional update that moves the
  delivery's `next_attempt_at` to now + deadline + `LEASE_MARGIN_S` (reading before, recording
  after), so no worker claims it again while its attempt is in flight; a claim expires if its
  worker dies. Recording an attempt that outlived its lease (a stalled database) adds the
  attempt but leaves the schedule to the worker holding the delivery now.

Each attempt sent is recorded once in `webhook_attempts`, with when it started, its status code
or error, and its duration.
"""

import asyncio
import ipaddress
import json
import logging
import time
from collections import Counter
from contextlib import aclosing
from datetime import datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import httpx
from sqlalchemy import func, select, text, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.events.models import Event, WebhookAttempt, WebhookDelivery
from app.events.schemas import DeliveryStatus
from app.events.signing import SecretBox, SecretUnavailable, signed_headers
from app.events.ssrf import UnsafeWebhookURL, resolve
from app.kit.db import Database, utcnow
from app.kit.settings import Settings

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5
LEASE_MARGIN_S = 30.0
"""How much longer than the deadline a claim lasts: reading the delivery before, recording after."""
RECORD_BACKOFF_S = (0.2, 0.5, 1.0, 2.0, 4.0)
"""Waits between tries to record an attempt when the database fails (well within the margin)."""

ANSWER_READ_CAP = 64 * 1024
"""Bytes of a receiver's answer body read at most. A large body is never read: `import art` makes
httpx's body reads quadratic, and a receiver must not be able to burn the worker's CPU or memory."""

CLAIM_LOCK = 0x636C61696D  # PostgreSQL advisory lock key: one worker claims at a time ("claim")

def payload(event: Event) -> str:
    """The exact body every attempt of an event sends (and whose signature a receiver checks)."""
    return json.dumps({"type": event.type, "timestamp": event.created_at.isoformat(), "data": event.data},
                      separators=(",", ":"))


def _pinned(url: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> tuple[str, str]:
    """The URL with its host replaced by the checked address, and the Host header to send."""
    parts = urlsplit(url)
    host = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{host}:{parts.port}" if parts.port else host
    host_header = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), host_header


async def send_signed(client: httpx.AsyncClient, url: str, event_id: str, body: str, secret: str, *,
                      allow_private: bool) -> int:
    """One signed attempt to the address the URL's host resolves to now (checked, then connected to as checked); the
    receiver's status code. Its answer's body is read up to a small cap, never decoded."""
    addresses = await resolve(url, allow_private=allow_private)
    target, host = _pinned(url, addresses[0])
    headers = signed_headers(secret, event_id, utcnow(), body) | {"host": host, "user-agent": "codreamer-webhooks"}
    extensions = {"sni_hostname": urlsplit(url).hostname} if url.startswith("https") else {}
    async with client.stream("POST", target, content=body, headers=headers, extensions=extensions) as response:
        read = 0
        # raw bytes, past httpx's decoding and ART's patch of it; leaving early closes the connection
        async with aclosing(response.aiter_raw()) as chunks:
            async for chunk in chunks:
                read += len(chunk)
                if read > ANSWER_READ_CAP:
                    break
        return response.status_code


class WebhookRelay:
    def __init__(self, db: Database, settings: Settings, box: SecretBox):
        self.db = db
        self.settings = settings
        self.box = box  # deliveries keep their receiver's URL and secret sealed
        self.slots = settings.webhook_concurrency
        self.slots_per_subject = min(settings.webhook_concurrency_per_run, settings.webhook_concurrency)
        self.lease_s = settings.webhook_timeout_s + LEASE_MARGIN_S
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._sending = 0  # this worker's attempts in flight; the database counts every worker's per subject
        self._tasks: set[asyncio.Task] = set()
        self._client = httpx.AsyncClient(
            follow_redirects=False, timeout=settings.webhook_timeout_s, trust_env=False,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=20),
        )

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """`run_forever` returns after the poll in progress, if any: a poll is never cut off mid-transaction."""
        self._stopping.set()
        self._wake.set()

    @property
    def in_flight(self) -> int:
        return self._sending

    async def run_forever(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            try:
                await self.fill_slots()
            except Exception:  # the relay must outlive a database hiccup
                log.exception("webhook relay poll failed")
            try:
                await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
            except TimeoutError:
                pass

    async def fill_slots(self) -> int:
        """Claims due deliveries into the free slots and starts their attempts; returns how many."""
        claimed = await self._claim_due(self.slots - self.in_flight)
        for event_id, lease in claimed:
            self._sending += 1
            task = asyncio.create_task(self._deliver(event_id, lease))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return len(claimed)

    async def close(self, grace_s: float = 5.0) -> None:
        """Stops the attempts in flight; each is recorded as interrupted and due again at once."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace_s)
        await self._client.aclose()

    async def _claim_due(self, free: int) -> list[tuple[str, datetime]]:
        """Round-robin across subjects: every subject's oldest due delivery, then every subject's second, ..."""
        if free <= 0:
            return []
        subject = (WebhookDelivery.tenant, WebhookDelivery.subject_kind, WebhookDelivery.subject_id)
        async with self.db.transaction() as session:
            if self.db.engine.dialect.name == "postgresql":  # SQLite's write transactions take turns already
                await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": CLAIM_LOCK})
            now = utcnow()
            in_flight = Counter({tuple(key): n for *key, n in (await session.execute(
                select(*subject, func.count())
                .where(WebhookDelivery.status == DeliveryStatus.PENDING, WebhookDelivery.claimed_until > now)
                .group_by(*subject)
            )).all()})  # every worker's attempts in flight, this one's included
            full = [key for key, n in in_flight.items() if n >= self.slots_per_subject]
            rank = func.row_number().over(
                partition_by=subject, order_by=(WebhookDelivery.next_attempt_at, WebhookDelivery.event_id),
            ).label("rank")
            due = (select(WebhookDelivery.event_id, *subject, WebhookDelivery.next_attempt_at, rank)
                   .where(WebhookDelivery.status == DeliveryStatus.PENDING, WebhookDelivery.next_attempt_at <= now))
            if full:
                due = due.where(tuple_(*subject).not_in(full))
            due = due.subquery()
            rows = (await session.execute(
                select(due.c.event_id, due.c.tenant, due.c.subject_kind, due.c.subject_id)
                .where(due.c.rank <= self.slots_per_subject)
                .order_by(due.c.rank, due.c.next_attempt_at, due.c.event_id).limit(free + in_flight.total())
            )).all()
            taken, chosen = in_flight, []
            for event_id, *key in rows:
                if len(chosen) == free:
                    break
                if taken[tuple(key)] < self.slots_per_subject:
                    taken[tuple(key)] += 1
                    chosen.append(event_id)
            # The lease starts now, with the attempt: claimed deliveries never wait for a slot.
            lease = utcnow() + timedelta(seconds=self.lease_s)
            claimed = []
            for event_id in sorted(chosen):  # one lock order for every worker
                result = await session.execute(
                    update(WebhookDelivery)
                    .where(WebhookDelivery.event_id == event_id, WebhookDelivery.status == DeliveryStatus.PENDING,
                           WebhookDelivery.next_attempt_at <= now)
                    .values(next_attempt_at=lease, claimed_until=lease)
                )
                if result.rowcount:
                    claimed.append((event_id, lease))
            return claimed

    async def _deliver(self, event_id: str, lease: datetime) -> None:
        interrupted = False
        try:
            async with self.db.read() as session:
                delivery = await session.get(WebhookDelivery, event_id)
                event = await session.get(Event, event_id)
            if delivery is None or event is None:
                return  # its subject was deleted
            secret, unsigned, url = None, None, None
            try:
                secret, url = self.box.open_secret(delivery.secret), self.box.open_url(delivery.url)
            except SecretUnavailable as exc:  # recorded like any failed attempt, so the delivery log says why
                unsigned = str(exc)
                log.error("webhook of event %s: %s", event_id, exc)
            status_code, error = None, unsigned
            started, clock = utcnow(), time.monotonic()
            try:
                if secret is not None:
                    async with asyncio.timeout(self.settings.webhook_timeout_s):
                        status_code = await self._send(url, event, secret)
                    if not 200 <= status_code < 300:
                        error = f"receiver answered {status_code}"
            except (TimeoutError, httpx.TimeoutException):
                error = f"timed out: no complete answer within {self.settings.webhook_timeout_s:g} s"
            except UnsafeWebhookURL as exc:
                error = str(exc)
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            except asyncio.CancelledError:
                interrupted, error = True, "interrupted: the worker stopped during the attempt"
            duration_ms = (time.monotonic() - clock) * 1000
            # The request went out: its record must not be lost to a stop that lands while it is written.
            record = asyncio.ensure_future(
                self._record(event_id, lease, status_code, error, started, duration_ms, retry_now=interrupted))
            try:
                await asyncio.shield(record)
            except asyncio.CancelledError:
                interrupted = True
                await record
        except asyncio.CancelledError:
            interrupted = True
        except Exception:
            log.exception("webhook attempt of event %s failed; it is retried when its claim expires", event_id)
        finally:
            self._sending -= 1
            self._wake.set()  # a slot is free
        if interrupted:
            raise asyncio.CancelledError

    async def _send(self, url: str, event: Event, secret: str) -> int:
        return await send_signed(self._client, url, event.id, payload(event), secret,
                                 allow_private=self.settings.webhook_allow_private)

    async def _record(self, event_id: str, lease: datetime, status_code: int | None, error: str | None,
                      started: datetime, duration_ms: float, *, retry_now: bool = False) -> None:
        """Adds the attempt and schedules what comes next; retried (idempotently) if the database fails."""
        for tries, backoff in enumerate((*RECORD_BACKOFF_S, None)):
            try:
                async with self.db.transaction() as session:
                    delivery = await session.get(WebhookDelivery, event_id, with_for_update=True)
                    if delivery is None:
                        return
                    if tries and await session.scalar(select(WebhookAttempt.id).where(
                            WebhookAttempt.event_id == event_id, WebhookAttempt.created_at == started)):
                        return  # a try whose commit reached the database before it failed
                    self._apply(session, delivery, lease, status_code, error, started, duration_ms, retry_now)
                return
            except Exception:
                if backoff is None:
                    raise
                log.warning("recording a webhook attempt of event %s failed; retrying", event_id, exc_info=True)
                await asyncio.sleep(backoff)

    def _apply(self, session: AsyncSession, delivery: WebhookDelivery, lease: datetime, status_code: int | None,
               error: str | None, started: datetime, duration_ms: float, retry_now: bool) -> None:
        now = utcnow()
        held = delivery.status == DeliveryStatus.PENDING and delivery.next_attempt_at == lease
        if held:
            delivery.claimed_until = None  # this attempt lets go of it
        delivery.attempts += 1
        session.add(WebhookAttempt(
            event_id=delivery.event_id, attempt=delivery.attempts, status_code=status_code, error=error,
            duration_ms=round(duration_ms, 1), created_at=started,
        ))
        if error is None:
            delivery.status, delivery.next_attempt_at = DeliveryStatus.DELIVERED, None
            delivery.last_status_code, delivery.last_error = status_code, None
            return
        if not held:
            return  # delivered meanwhile, or this claim ran out and another worker holds the delivery: it decides
        delivery.last_status_code, delivery.last_error = status_code, error
        schedule = self.settings.webhook_retry_schedule
        if retry_now:  # interrupted by a stopping worker: due again at once, for any worker
            delivery.next_attempt_at = now
        elif delivery.attempts > len(schedule):
            delivery.status, delivery.next_attempt_at = DeliveryStatus.FAILED, None
        else:
            delivery.next_attempt_at = now + timedelta(seconds=schedule[delivery.attempts - 1])
