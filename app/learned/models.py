from datetime import datetime

from pydantic import BaseModel, TypeAdapter
from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.kit.db import Base, TypedJSON, UTCDateTime, utcnow


class TrafficArm(BaseModel):
    """A policy drafting on a graph with its share of the traffic: a deployment's challenger, a batch's arm."""

    policy_id: str | None  # None only for a policy whose run was deleted before policies were kept
    run_id: str
    iteration: int
    share: float | None  # None under `auto` traffic: each batch's shares are drawn then


ARMS = TypedJSON(TypeAdapter(list[TrafficArm]))


class Policy(Base):
    """What a run had learned once iteration k was recorded, kept apart from the run: its checkpoint, node scores and
    lessons are copied here (or, for a backend that keeps checkpoints remotely, named), so it outlives the run.

    No foreign key to the run: deleting the run leaves it; `source` stays its alias `<run_id>@<k>`."""

    __tablename__ = "policies"
    __table_args__ = (Index("ix_policies_tenant_graph", "tenant", "graph_id", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))
    graph_id: Mapped[str] = mapped_column(String(200))
    name: Mapped[str | None] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(String(160), unique=True)  # `<run_id>@<k>`
    run_id: Mapped[str] = mapped_column(String(40))
    iteration: Mapped[int]
    backend: Mapped[str] = mapped_column(String(40))
    base_model: Mapped[str] = mapped_column(String(255))
    training_step: Mapped[int | None]  # the checkpoint's step (trainable backends)
    # the model name the checkpoint is stored under: the policy's own copy (embedded), or the run's at its provider
    checkpoint: Mapped[str | None] = mapped_column(String(255))
    config: Mapped[dict]  # the run's effective configuration (app.runs.schemas.EffectiveConfig)
    node_scores: Mapped[dict]  # per training scenario, the scores that had moved from 1.0 by iteration k
    lessons: Mapped[dict | None]  # what in-context learning had distilled per scenario by then
    reward: Mapped[dict | None]  # the iteration's rewards (app.loop.schemas.RewardStats)
    trained_at: Mapped[datetime] = mapped_column(UTCDateTime)  # when iteration k was recorded
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Deployment(Base):
    """One promotion of a policy on a graph; the graph's latest is its current deployment, the others its history.

    Names its champion by policy id (`policy_id`) and by alias (`run_id`@`iteration`, what responses show); no foreign
    key to either: the history outlives policies deleted since (a deployed one cannot be)."""

    __tablename__ = "deployments"
    __table_args__ = (Index("ix_deployments_graph", "graph_id", "id"), Index("ix_deployments_run", "run_id"))

    id: Mapped[int] = mapped_column(primary_key=True)
    graph_id: Mapped[str] = mapped_column(String(200), ForeignKey("graphs.id", ondelete="CASCADE"))
    tenant: Mapped[str] = mapped_column(String(100))
    # None: a policy whose run was deleted before policies were kept apart from runs (its history only)
    policy_id: Mapped[str | None] = mapped_column(String(40), index=True)
    run_id: Mapped[str] = mapped_column(String(40))
    iteration: Mapped[int]
    # up to three challengers beside the champion, which takes the rest of the traffic
    challengers: Mapped[list[TrafficArm]] = mapped_column(ARMS, default=list)
    traffic: Mapped[str] = mapped_column(String(8), default="fixed")  # "auto": shares by top-two Thompson sampling
    floor: Mapped[float] = mapped_column(default=0.0)  # every policy's least share
    min_sends: Mapped[int] = mapped_column(default=100)  # "auto": mature sends a policy needs before its share moves
    auto_promote: Mapped[bool] = mapped_column(default=False)  # promote a challenger once an evaluation puts it ahead
    require_evidence: Mapped[bool] = mapped_column(default=False)  # a new champion needs an evaluation putting it ahead
    sequential: Mapped[bool] = mapped_column(default=False)  # the gate reads an always-valid interval of the difference
    forced: Mapped[bool] = mapped_column(default=False)  # promoted against (or without) the evidence, by request
    evaluation_id: Mapped[str | None] = mapped_column(String(40))  # the evaluation that justified the promotion
    trigger: Mapped[str] = mapped_column(String(16), default="request")  # or "auto_promote": an evaluation promoted it
    rollback: Mapped[bool] = mapped_column(default=False)  # its champion had been the graph's champion before
    # the policy.promoted, policy.rolled_back or deployment.changed event announcing it on the graph
    event_id: Mapped[str | None] = mapped_column(String(40))
    # the receiver of the graph's events, both sealed (`SecretBox`); carried from one deployment to the next
    webhook_url: Mapped[str | None] = mapped_column(Text)
    webhook_secret: Mapped[str | None] = mapped_column(Text)
    deployed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Evaluation(Base):
    """Policies compared on held-out prospects and on the drafts already sent (`app.evaluations` runs it); its
    result is the evidence a deployment that requires it reads."""

    __tablename__ = "evaluations"
    __table_args__ = (Index("ix_evaluations_graph", "tenant", "graph_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(100))
    graph_id: Mapped[str] = mapped_column(String(200), ForeignKey("graphs.id", ondelete="CASCADE"))
    policies: Mapped[list]  # the policies' aliases, as resolved (`<run_id>@<k>`)
    policy_ids: Mapped[list] = mapped_column(default=list)  # their ids, in the same order
    prospects: Mapped[list | None]  # given held-out prospects; None: the graph's scenarios not trained on
    status: Mapped[str] = mapped_column(String(16), default="queued")
    result: Mapped[dict | None]  # app.policies.schemas.EvaluationResult
    error: Mapped[dict | None]
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
