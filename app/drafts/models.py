from datetime import datetime

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.drafts.schemas import BatchStatus, Fit
from app.kit.db import Base, StrEnumText, UTCDateTime, utcnow
from app.learned.models import ARMS, TrafficArm


class DraftBatch(Base):
    """Prospects to draft with one policy (`policy_id`, alias `run_id`@`iteration`); it goes with that policy, never
    with the run the policy came from."""

    __tablename__ = "draft_batches"
    __table_args__ = (UniqueConstraint("tenant", "idempotency_key"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))
    graph_id: Mapped[str] = mapped_column(String(200))
    policy_id: Mapped[str] = mapped_column(ForeignKey("policies.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[str] = mapped_column(String(40))
    iteration: Mapped[int]
    status: Mapped[BatchStatus] = mapped_column(StrEnumText(BatchStatus), default=BatchStatus.QUEUED)
    count: Mapped[int]
    # the policies drafting, with their shares, the first the one the batch names
    arms: Mapped[list[TrafficArm]] = mapped_column(ARMS, default=list)
    completed: Mapped[int] = mapped_column(default=0)
    seed: Mapped[int] = mapped_column(default=0)
    webhook_url: Mapped[str | None] = mapped_column(Text)  # sealed, as a run's
    webhook_secret: Mapped[str | None] = mapped_column(Text)  # sealed
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    request_hash: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[dict | None]
    sender: Mapped[dict | None]  # app.knowledge_graph.schemas.Sender; null: the seller's team signs
    skip_low_fit: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Draft(Base):
    """One prospect of a batch, in the order given, and once drafted its email."""

    __tablename__ = "drafts"

    batch_id: Mapped[str] = mapped_column(ForeignKey("draft_batches.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    prospect: Mapped[dict]  # app.drafts.schemas.DraftProspect, its id and goal filled in
    # the policy that writes it, drawn by share (None: written before policies were kept apart from runs, by one whose
    # run was deleted before then)
    policy_id: Mapped[str | None] = mapped_column(String(40))
    run_id: Mapped[str] = mapped_column(String(40))  # and its alias, `run_id`@`iteration`
    iteration: Mapped[int]
    like: Mapped[str | None] = mapped_column(String(200))  # the training scenario whose learned state it used
    email: Mapped[dict | None]  # DraftEmail; null until drafted (or when the policy wrote none)
    judge_score: Mapped[float | None]
    fit: Mapped[Fit | None] = mapped_column(StrEnumText(Fit))
    fit_reason: Mapped[str | None] = mapped_column(Text)
    variant: Mapped[int] = mapped_column(default=0)
    propensity: Mapped[float] = mapped_column(default=1.0)
    drafted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    sanitized: Mapped[list | None]  # what was removed from the prospect's fields (`app.kit.untrusted_text`), if anything
    suppressed: Mapped[dict | None]  # `{"reason", "until"}`: the prospect's address was suppressed, no email written
