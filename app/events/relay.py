"""The outbox relay: delivers pending webhook deliveries, off the learning loop's path.

Every worker runs one. Deliveries are claimed with a conditional update, so several workers
share the outbox without sending an attempt twice; a claim expires if its worker dies.
"""

import asyncio
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

import httpx
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import Database, utcnow
from app.events.models import Event, WebhookAttempt, WebhookDelivery
from app.events.signing import signed_headers
from app.events.ssrf import UnsafeWebhookURL, resolve
from app.settings import Settings

log = logging.getLogger(__name__)
POLL_SECONDS = 0.5
CLAIM_BATCH = 50

SecretLookup = Callable[[AsyncSession, str], Awaitable[str]]
"""The signing secret of a run's receiver (the runs domain owns it)."""


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


class WebhookRelay:
    def __init__(self, db: Database, settings: Settings, secret_of: SecretLookup):
        self.db = db
        self.settings = settings
        self.secret_of = secret_of
        self._wake = asyncio.Event()
        self._limit = asyncio.Semaphore(32)
        self._tasks: set[asyncio.Task] = set()
        self._client = httpx.AsyncClient(follow_redirects=False, timeout=settings.webhook_timeout_s, trust_env=False)

    def wake(self) -> None:
        self._wake.set()

    async def run_forever(self) -> None:
        while True:
            try:
                for event_id in await self._claim_due():
                    task = asyncio.create_task(self._deliver(event_id))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
            except Exception:  # the relay must outlive a database hiccup
                log.exception("webhook relay poll failed")
            try:
                await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self._client.aclose()

    async def _claim_due(self) -> list[str]:
        now = utcnow()
        lease = now + timedelta(seconds=self.settings.webhook_timeout_s + 30)
        async with self.db.transaction() as session:
            due = (await session.execute(
                select(WebhookDelivery.event_id, WebhookDelivery.next_attempt_at)
                .where(WebhookDelivery.status == "pending", WebhookDelivery.next_attempt_at <= now)
                .order_by(WebhookDelivery.next_attempt_at).limit(CLAIM_BATCH)
            )).all()
            claimed = []
            for event_id, next_at in due:
                result = await session.execute(
                    update(WebhookDelivery)
                    .where(WebhookDelivery.event_id == event_id, WebhookDelivery.next_attempt_at == next_at,
                           WebhookDelivery.status == "pending")
                    .values(next_attempt_at=lease)
                )
                if result.rowcount:
                    claimed.append(event_id)
            return claimed

    async def _deliver(self, event_id: str) -> None:
        async with self._limit:
            async with self.db.read() as session:
                delivery = await session.get(WebhookDelivery, event_id)
                event = await session.get(Event, event_id)
                secret = await self.secret_of(session, delivery.run_id)
            status_code, error = None, None
            started = utcnow()
            try:
                status_code = await self._send(delivery.url, event, secret)
                if not 200 <= status_code < 300:
                    error = f"receiver answered {status_code}"
            except UnsafeWebhookURL as exc:
                error = str(exc)
            except httpx.TimeoutException:
                error = f"timed out after {self.settings.webhook_timeout_s:g} s"
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            await self._record(event_id, status_code, error, started)

    async def _send(self, url: str, event: Event, secret: str) -> int:
        addresses = await resolve(url, allow_private=self.settings.webhook_allow_private)
        body = payload(event)
        target, host = _pinned(url, addresses[0])
        headers = signed_headers(secret, event.id, utcnow(), body) | {"host": host, "user-agent": "codreamer-webhooks"}
        extensions = {"sni_hostname": urlsplit(url).hostname} if url.startswith("https") else {}
        response = await self._client.post(target, content=body, headers=headers, extensions=extensions)
        return response.status_code

    async def _record(self, event_id: str, status_code: int | None, error: str | None, started: datetime) -> None:
        now = utcnow()
        async with self.db.transaction() as session:
            delivery = await session.get(WebhookDelivery, event_id, with_for_update=True)
            delivery.attempts += 1
            delivery.last_status_code, delivery.last_error = status_code, error
            session.add(WebhookAttempt(
                event_id=event_id, attempt=delivery.attempts, status_code=status_code, error=error,
                duration_ms=(now - started).total_seconds() * 1000, created_at=now,
            ))
            schedule = self.settings.webhook_retry_schedule
            if error is None:
                delivery.status, delivery.next_attempt_at = "delivered", None
            elif delivery.attempts > len(schedule):
                delivery.status, delivery.next_attempt_at = "failed", None
            else:
                delivery.next_attempt_at = now + timedelta(seconds=schedule[delivery.attempts - 1])
