from datetime import date, datetime

from sqlalchemy import Index, String, Text, UniqueConstraint, true
from sqlalchemy.orm import Mapped, mapped_column

from app.kit.db import Base, StrEnumText, UTCDateTime, utcnow
from app.outcomes.providers import Provider
from app.outcomes.replies import DecidedBy, ReplyCategory
from app.outcomes.schemas import OutcomeType, Sentiment


class EmailRef(Base):
    """Where an email the service wrote came from, by its ref: outcomes reported for the ref find their run here.

    No foreign key to the run: a draft's ref stays with its policy once the run is deleted (the run's own refs go with
    it, `app.runs.repository.delete_run`)."""

    __tablename__ = "email_refs"
    __table_args__ = (Index("ix_email_refs_run_iteration", "run_id", "iteration"), Index("ix_email_refs_tenant_graph", "tenant", "graph_id"))

    ref: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))  # the run's, which never changes
    run_id: Mapped[str] = mapped_column(String(40))
    iteration: Mapped[int]
    slot: Mapped[int]  # app.outcomes.refs.PUBLISHED, or the trajectory's position
    graph_id: Mapped[str] = mapped_column(String(200))
    scenario_id: Mapped[str] = mapped_column(String(200))
    judge_score: Mapped[float | None]
    features: Mapped[list]  # app.loop.features.email_features: what the outcome model learns over
    content_hash: Mapped[str] = mapped_column(String(64))
    # a draft's: the policy that wrote it (run_id and iteration then its alias), its batch and prospect
    policy_id: Mapped[str | None] = mapped_column(String(40), index=True)
    draft_batch_id: Mapped[str | None] = mapped_column(String(40), index=True)
    prospect_id: Mapped[str | None] = mapped_column(String(200))
    # a draft's, when its prospect has an address: the keyed hashes (as OutcomeRecord's) of it and of its domain, which
    # a reply must come from to count (`app.outcomes.verification`)
    recipient: Mapped[str | None] = mapped_column(String(64))
    recipient_domain: Mapped[str | None] = mapped_column(String(64))


class OutcomeSource(Base):
    """An email provider's webhooks, pointed at `/outcomes/hooks/{id}`, with what verifies them (sealed)."""

    __tablename__ = "outcome_sources"
    __table_args__ = (Index("ix_outcome_sources_tenant_id", "tenant", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))
    provider: Mapped[Provider] = mapped_column(StrEnumText(Provider))
    name: Mapped[str | None] = mapped_column(String(200))
    secret: Mapped[str | None] = mapped_column(Text)  # sealed by Services.secrets
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class OutcomeRecord(Base):
    """One attributed outcome of one sent email; an event id counts once per tenant."""

    __tablename__ = "outcome_events"
    __table_args__ = (UniqueConstraint("tenant", "event_id"), Index("ix_outcome_events_run_ref", "run_id", "ref"))

    id: Mapped[int] = mapped_column(primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))
    event_id: Mapped[str] = mapped_column(String(500))
    source_id: Mapped[str | None] = mapped_column(String(40))  # null: POST /outcomes
    run_id: Mapped[str] = mapped_column(String(40))  # its ref's (no foreign key: a draft's outlives the run)
    iteration: Mapped[int]
    ref: Mapped[str] = mapped_column(String(40))
    type: Mapped[OutcomeType] = mapped_column(StrEnumText(OutcomeType))
    occurred_at: Mapped[datetime] = mapped_column(UTCDateTime)
    recipient: Mapped[str] = mapped_column(String(64))  # HMAC-SHA256 under SECRET_KEY, never the address
    recipient_domain: Mapped[str | None] = mapped_column(String(64))  # the same of its domain (none: a key without "@")
    # a reply from an address the email went to (`app.outcomes.verification`); an unverified one is shown, never counted.
    # Every other event is the sender's own report, verified.
    verified: Mapped[bool] = mapped_column(default=True, server_default=true())
    machine: Mapped[bool] = mapped_column(default=False)
    sentiment: Mapped[Sentiment | None] = mapped_column(StrEnumText(Sentiment))
    text: Mapped[str | None] = mapped_column(Text)  # a reply's text, only with STORE_REPLY_TEXT
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # what a reply (or a provider's unsubscribe, complaint or bounce) meant; null for every other outcome
    category: Mapped[ReplyCategory | None] = mapped_column(StrEnumText(ReplyCategory))
    confidence: Mapped[float | None]
    decided_by: Mapped[DecidedBy | None] = mapped_column(StrEnumText(DecidedBy))
    reason: Mapped[str | None] = mapped_column(Text)
    returns_on: Mapped[date | None]


class OutcomeNonce(Base):
    """A signature's one-time token (Mailgun's), refused when seen again under the same signing key.

    Keyed by the key, not the source: a block signed once must not be replayed to another source that shares the
    key. Stored in the transaction that stores the request's events, so a request that failed can be retried."""

    __tablename__ = "outcome_nonces"

    signing_key: Mapped[str] = mapped_column(String(64), primary_key=True)  # a keyed hash of the key, never the key
    nonce: Mapped[str] = mapped_column(String(200), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Suppression(Base):
    """A recipient the tenant's drafts write no email for, by the keyed hash recipients are stored as (never the
    address): until `until` (an out-of-office's return date), or for good."""

    __tablename__ = "suppressions"

    tenant: Mapped[str] = mapped_column(String(100), primary_key=True)
    recipient: Mapped[str] = mapped_column(String(64), primary_key=True)  # SecretBox.pseudonym of the address
    reason: Mapped[str] = mapped_column(String(200))
    since: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    until: Mapped[date | None]
