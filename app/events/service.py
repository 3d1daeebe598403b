"""Writing and reading the event log; each event and its webhook delivery commit together (the outbox)."""

import secrets
import time

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.events.models import Event, WebhookAttempt, WebhookDelivery
from app.events.schemas import DeliveryStatus, EventData, Receiver, Subject
from app.kit.db import utcnow
from app.kit.pages import fetch_page


def new_id(prefix: str) -> str:
    """Sortable by creation time, so pagination can use the id as its cursor."""
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(6)}"


def _of(model: type[Event] | type[WebhookDelivery], subject: Subject) -> tuple:
    return model.tenant == subject.tenant, model.subject_kind == subject.kind, model.subject_id == subject.id


async def emit(session: AsyncSession, subject: Subject, payload: EventData, receiver: Receiver | None) -> Event:
    """Adds the event (its `seq` the payload's), and its delivery when the subject has a receiver, to the caller's
    transaction."""
    event = Event(
        id=new_id("evt"), tenant=subject.tenant, subject_kind=subject.kind, subject_id=subject.id,
        seq=payload.seq, type=payload.type, data=payload.model_dump(mode="json"), created_at=utcnow(),
    )
    session.add(event)
    if receiver is not None:
        await session.flush()
        session.add(WebhookDelivery(
            event_id=event.id, tenant=subject.tenant, subject_kind=subject.kind, subject_id=subject.id, type=event.type,
            url=receiver.url, secret=receiver.secret, status=DeliveryStatus.PENDING, attempts=0,
            next_attempt_at=event.created_at, created_at=event.created_at,
        ))
    return event


async def last_seq(session: AsyncSession, subject: Subject) -> int:
    """The subject's latest seq (0 before its first event). The next event's is one more, while the caller holds the
    subject's lock (the graph's or the batch's row)."""
    return await session.scalar(select(func.coalesce(func.max(Event.seq), 0)).where(*_of(Event, subject)))


async def events_page(session: AsyncSession, subject: Subject, *, after: int, limit: int) -> tuple[list[Event], bool]:
    return await fetch_page(session, select(Event).where(*_of(Event, subject), Event.seq > after).order_by(Event.seq),
                            limit)


async def forget(session: AsyncSession, subject: Subject) -> None:
    """The subject's events, their deliveries and attempts (by ON DELETE CASCADE): with the subject they belong to."""
    await session.execute(delete(Event).where(*_of(Event, subject)))


async def deliveries(session: AsyncSession, subject: Subject) -> list[WebhookDelivery]:
    return list((await session.scalars(
        select(WebhookDelivery).where(*_of(WebhookDelivery, subject))
        .order_by(WebhookDelivery.created_at, WebhookDelivery.event_id)
    )).all())


async def attempts(session: AsyncSession, subject: Subject) -> dict[str, list[WebhookAttempt]]:
    """Every webhook attempt of a subject's events, by event id, oldest first: one query."""
    rows = (await session.scalars(
        select(WebhookAttempt).join(WebhookDelivery, WebhookDelivery.event_id == WebhookAttempt.event_id)
        .where(*_of(WebhookDelivery, subject))
        .order_by(WebhookAttempt.event_id, WebhookAttempt.attempt, WebhookAttempt.id)
    )).all()
    by_event: dict[str, list[WebhookAttempt]] = {}
    for row in rows:
        by_event.setdefault(row.event_id, []).append(row)
    return by_event
