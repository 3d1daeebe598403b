"""Writing and reading the event log; each event and its webhook delivery commit together (the outbox)."""

import secrets
import time

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.kit.db import utcnow
from app.events.models import Event, WebhookAttempt, WebhookDelivery
from app.events.schemas import DeliveryStatus, EventData


def new_id(prefix: str) -> str:
    """Sortable by creation time, so pagination can use the id as its cursor."""
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"


async def emit(session: AsyncSession, payload: EventData, webhook_url: str | None) -> Event:
    """Adds the event, and its delivery when the run has a receiver, to the caller's transaction."""
    event = Event(
        id=new_id("evt"), run_id=payload.run_id, seq=payload.seq, type=payload.type,
        data=payload.model_dump(mode="json"), created_at=utcnow(),
    )
    session.add(event)
    if webhook_url:
        await session.flush()
        session.add(WebhookDelivery(
            event_id=event.id, run_id=event.run_id, type=event.type, url=webhook_url, status=DeliveryStatus.PENDING,
            attempts=0, next_attempt_at=event.created_at, created_at=event.created_at,
        ))
    return event


async def events_page(session: AsyncSession, run_id: str, *, after: int, limit: int) -> tuple[list[Event], bool]:
    rows = (await session.scalars(
        select(Event).where(Event.run_id == run_id, Event.seq > after).order_by(Event.seq).limit(limit + 1)
    )).all()
    return list(rows[:limit]), len(rows) > limit


async def deliveries(session: AsyncSession, run_id: str) -> list[WebhookDelivery]:
    return list((await session.scalars(
        select(WebhookDelivery).where(WebhookDelivery.run_id == run_id)
        .order_by(WebhookDelivery.created_at, WebhookDelivery.event_id)
    )).all())


async def run_attempts(session: AsyncSession, run_id: str) -> dict[str, list[WebhookAttempt]]:
    """Every webhook attempt of a run, by event id, oldest first: one query."""
    rows = (await session.scalars(
        select(WebhookAttempt).join(WebhookDelivery, WebhookDelivery.event_id == WebhookAttempt.event_id)
        .where(WebhookDelivery.run_id == run_id).order_by(WebhookAttempt.event_id, WebhookAttempt.attempt, WebhookAttempt.id)
    )).all()
    by_event: dict[str, list[WebhookAttempt]] = {}
    for row in rows:
        by_event.setdefault(row.event_id, []).append(row)
    return by_event
