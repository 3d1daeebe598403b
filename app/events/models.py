"""The event log and its webhook outbox: what happened to a subject (a run, a graph, a draft batch), and who still has
to hear it."""

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.events.schemas import DeliveryStatus, SubjectKind
from app.kit.db import Base, StrEnumText, UTCDateTime, utcnow


class Event(Base):
    """One thing that happened to a subject; `seq` orders a subject's events from 1. No foreign key to the subject
    (it lives in one of three tables): whoever deletes a subject forgets its events (`service.forget`)."""

    __tablename__ = "events"
    __table_args__ = (UniqueConstraint("tenant", "subject_kind", "subject_id", "seq", name="uq_events_subject_seq"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))
    subject_kind: Mapped[SubjectKind] = mapped_column(StrEnumText(SubjectKind))
    subject_id: Mapped[str] = mapped_column(String(200))
    seq: Mapped[int]
    type: Mapped[str] = mapped_column(String(40))
    data: Mapped[dict]
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookDelivery(Base):
    """The outbox row of one event for one receiver; written with the event, in its transaction. It carries the
    receiver's URL and secret, sealed, so the relay delivers every subject's webhooks alike."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_subject", "tenant", "subject_kind", "subject_id", "created_at"),
    )

    event_id: Mapped[str] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))
    subject_kind: Mapped[SubjectKind] = mapped_column(StrEnumText(SubjectKind))
    subject_id: Mapped[str] = mapped_column(String(200))
    type: Mapped[str] = mapped_column(String(40))
    url: Mapped[str] = mapped_column(Text)
    secret: Mapped[str] = mapped_column(Text)
    status: Mapped[DeliveryStatus] = mapped_column(StrEnumText(DeliveryStatus), default=DeliveryStatus.PENDING)
    attempts: Mapped[int] = mapped_column(default=0)
    last_status_code: Mapped[int | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Until when a worker's attempt holds it (its lease), cleared when the attempt is recorded: every
    # worker counts a subject's attempts in flight, its own and the others'.
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class WebhookAttempt(Base):
    __tablename__ = "webhook_attempts"
    __table_args__ = (Index("ix_webhook_attempts_event", "event_id", "attempt"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    event_id: Mapped[str] = mapped_column(ForeignKey("webhook_deliveries.event_id", ondelete="CASCADE"))
    attempt: Mapped[int]
    status_code: Mapped[int | None]
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[float]
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
