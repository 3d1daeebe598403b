from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.kit.db import Base, StrEnumText, UTCDateTime, utcnow
from app.runs.schemas import EffectiveConfig
from app.runs.status import RunStatus

if TYPE_CHECKING:
    from app.runs.records import IterationRecord


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_status_id", "status", "id"), Index("ix_runs_tenant_id", "tenant", "id"))

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # sortable by creation time
    tenant: Mapped[str] = mapped_column(String(100), server_default="public")  # who created it (app.kit.auth)
    status: Mapped[RunStatus] = mapped_column(StrEnumText(RunStatus))
    graph_id: Mapped[str] = mapped_column(ForeignKey("graphs.id"))
    config: Mapped[dict]
    iterations_total: Mapped[int]
    iterations_completed: Mapped[int] = mapped_column(default=0)
    last_seq: Mapped[int] = mapped_column(default=0)
    attempt: Mapped[int] = mapped_column(default=1)  # a resumed run gets a new workflow
    webhook_url: Mapped[str | None] = mapped_column(Text)
    webhook_secret: Mapped[str | None] = mapped_column(Text)  # sealed by Services.secrets, never stored in the clear
    error: Mapped[dict | None]
    waiting: Mapped[dict | None]  # app.runs.events.Waiting while the run waits for outcomes
    # a run started from a policy (`init_from`): the lessons it continues with, per scenario (its node scores and
    # checkpoint are copied where the run keeps its own)
    initial_context: Mapped[dict | None]
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    @cached_property
    def effective_config(self) -> EffectiveConfig:
        """`config` as the typed value it was stored from, parsed once per loaded row."""
        return EffectiveConfig.model_validate(self.config)


class Iteration(Base):
    """An `IterationRecord`, stored generically: a field with a column of its name goes there, any other one to `extra`."""

    __tablename__ = "iterations"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    iteration: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    email: Mapped[dict | None]
    rewards: Mapped[dict | None]
    training: Mapped[dict | None]
    node_scores_changed: Mapped[dict]
    metrics: Mapped[dict]
    trace_url: Mapped[str | None] = mapped_column(Text)  # the iteration's Weave trace, when tracing
    context: Mapped[dict | None]  # what in-context learning distilled for the next iteration's prompts, per scenario
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    extra: Mapped[dict | None]  # so a new record field needs no migration

    @classmethod
    def of(cls, run_id: str, record: "IterationRecord", **recorded) -> "Iteration":
        """The row for `record`, with what recording it adds (the scores' changes, when it finished)."""
        columns = set(cls.__table__.columns.keys())
        values = record.model_dump() | recorded
        extra = {k: v for k, v in record.model_dump(mode="json").items() if k not in columns}
        return cls(run_id=run_id, **{k: v for k, v in values.items() if k in columns}, extra=extra or None)

    @classmethod
    def view(cls, row) -> dict:
        """Every field `row` (an `Iteration`, or a row of its table) was written from, as `IterationOut` reads it."""
        fields = {c: getattr(row, c) for c in cls.__table__.columns.keys() if c not in ("run_id", "extra")}
        return fields | (row.extra or {})


class TrajectoryRecord(Base):
    """A scored rollout with its full conversation, so training can resume on any worker."""

    __tablename__ = "trajectories"
    __table_args__ = (Index("ix_trajectories_run_iteration", "run_id", "iteration", "position"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    iteration: Mapped[int]
    position: Mapped[int]
    group_index: Mapped[int]
    scenario_id: Mapped[str] = mapped_column(String(200))
    reward: Mapped[float]
    judge_score: Mapped[float | None]
    feedback_score: Mapped[float | None]
    feedback_source: Mapped[str | None] = mapped_column(String(16))  # app.loop.outcome_model.FeedbackSource
    feedback_confidence: Mapped[float | None]
    email: Mapped[dict | None]
    turns: Mapped[int]
    trajectory: Mapped[dict]


class NodeScore(Base):
    """A run's current score of a node for one scenario; nodes without a row are at the initial 1.0.

    `scenario_id` "" holds a run-wide score, written only by runs from before scores were kept per
    scenario: it applies to every scenario of its run.
    """

    __tablename__ = "node_scores"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    scenario_id: Mapped[str] = mapped_column(String(200), primary_key=True, server_default="")
    node_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    score: Mapped[float]


class NodeScoreChange(Base):
    """A score that moved in an iteration, for one scenario: the history behind `?iteration=k`."""

    __tablename__ = "node_score_changes"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    iteration: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    scenario_id: Mapped[str] = mapped_column(String(200), primary_key=True, server_default="")
    node_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    score: Mapped[float]


class IdempotencyKey(Base):
    __tablename__ = "idempotency_keys"

    tenant: Mapped[str] = mapped_column(String(100), primary_key=True, server_default="public")
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    request_hash: Mapped[str] = mapped_column(String(64))
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Worker(Base):
    """A run worker's last sign of life, so live workers can take over a dead one's runs."""

    __tablename__ = "workers"

    executor_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime)
