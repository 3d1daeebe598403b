"""Request and response bodies of the runs API (see the contract)."""

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.agent.schemas import FinalEmail, PublishedEmail, ScenarioContext, TracedEmail
from app.events.ssrf import WebhookURL
from app.kit.pages import Page
from app.kit.settings import BackendName
from app.loop.outcome_model import FeedbackSource
from app.loop.schemas import FeedbackMode, RewardStats, RunConfig
from app.runs.events import Waiting
from app.runs.status import RunError, RunStatus


class LearnLoopRequest(RunConfig):
    """The body of `POST /learn-loop`: a run's configuration and where its events go."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"iterations": 3, "rollouts_per_group": 4, "seed": 0,
                                          "webhook_url": "https://example.com/hooks/codreamer"}]},
    )

    init_from: str | None = Field(
        None, min_length=1, max_length=120, description="A policy (`<run_id>@<k>`) of the same graph to continue: the run "
        "starts from its checkpoint, node scores and lessons.")
    webhook_url: WebhookURL | None = Field(
        None, description="Receives this run's events, signed (Standard Webhooks). No credentials (`user:pass@`): "
        "the receiver authenticates the service by the signature.")


class EffectiveConfig(RunConfig):
    """What a run executes with: every default filled in (the run's `config`)."""

    scenario_ids: list[str]
    target_scenario_id: str
    backend: BackendName
    train_options: dict[str, Any]
    in_context: bool = False  # runs from before in-context learning had none
    judge: str = "default"  # runs from before judges per run had the JUDGE_MODEL judge
    feedback_source: FeedbackMode = FeedbackMode.ORACLE  # runs from before outcomes had the simulator rate every candidate
    max_steps_off_policy: int = 0  # runs from before pipelining ran in strict order
    exploration: float = 0.0  # runs from before exploration had none
    webhook_url: str | None = None
    init_from: str | None = None


class JudgeOut(BaseModel):
    name: str = Field(description="What a run's `judge` names.")
    model: str = Field(description="Its litellm model string (`embedded`: the embedded server's judge).")


class JudgeList(Page[JudgeOut]):
    """Every judge a run may name."""


class RunLinks(BaseModel):
    self: str
    iterations: str
    events: str
    node_scores: str


class RunCreated(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "run_id": "run_01a1fb9890e269c2fccc8886", "status": "queued", "webhook_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "links": {"self": "/runs/run_01a1fb9890e269c2fccc8886", "iterations": "/runs/run_01a1fb9890e269c2fccc8886/iterations",
                  "events": "/runs/run_01a1fb9890e269c2fccc8886/events",
                  "node_scores": "/runs/run_01a1fb9890e269c2fccc8886/node-scores"},
    }]})

    run_id: str
    status: RunStatus
    webhook_secret: str | None = Field(
        None, description="Present only when webhook_url was given, and only in the response that created the run.")
    webhook_secret_note: str | None = Field(None, description="Why webhook_secret is absent from a repeated response.")
    links: RunLinks


class RunOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "run_id": "run_01a1fb9890e269c2fccc8886", "status": "running",
        "config": {"graph_id": "demo", "scenario_ids": ["scn-healthcare-cto"], "target_scenario_id": "scn-healthcare-cto",
                   "iterations": 3, "rollouts_per_group": 4, "max_turns": 6, "learning_rate": 0.05, "feedback_weight": 0.3,
                   "top_fraction": 0.5, "seed": 0, "webhook_url": None, "backend": "embedded", "train_options": {}},
        "iterations_total": 3, "iterations_completed": 1, "created_at": "2026-11-21T00:54:02.212902Z",
        "started_at": "2026-11-21T00:54:02.397894Z", "finished_at": None, "error": None,
        "latest_email": {"subject": "Saint Aldric Health: Meridian Health case study", "body": "Dear Priya Raman, …",
                         "citations": ["case-study-meridian-health"]},
        "final_email": None,
    }]})

    run_id: str
    status: RunStatus
    config: EffectiveConfig
    iterations_total: int
    iterations_completed: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: RunError | None
    waiting: Waiting | None = Field(None, description="While the run waits for outcomes (feedback_wait): for what, until when.")
    latest_email: PublishedEmail | None
    final_email: FinalEmail | None = Field(description="When the run succeeded: the last iteration's email, with its iteration.")
    best_email: FinalEmail | None = Field(None, description="The best-scoring published email so far (by the judge), with its iteration.")


class RunList(Page[RunOut]):
    """The tenant's runs, newest first."""


class TrainingOut(BaseModel):
    step: int
    skipped: bool
    reason: str | None = None
    metrics: dict[str, float]


class IterationOut(BaseModel):
    iteration: int
    email: PublishedEmail | None
    rewards: RewardStats | None
    training: TrainingOut | None
    node_scores_changed: dict[str, float]
    metrics: dict[str, float]
    trace_url: str | None = Field(None, description="The iteration's Weave trace, when tracing is on.")
    context: dict[str, ScenarioContext] | None = Field(
        None, description="With in_context: per scenario, what this iteration distilled into the next iteration's prompts.")
    started_at: datetime
    finished_at: datetime


class TrajectoryOut(BaseModel):
    scenario_id: str
    reward: float
    judge_score: float | None
    feedback_score: float | None = Field(description=(
        "The feedback blended into the reward: the expected interest of a send over the interest scale's highest value, "
        "P(positive reply) − harm_ratio · P(negative reply), floored at 0 (see REPLY_INTEREST); opens weigh nothing."))
    feedback_source: FeedbackSource = Field(description=(
        "`observed`: this email was sent and its outcomes are mature; `predicted`: the outcome model's estimate from "
        "emails like it (on `oracle`, the simulator's rating); `none`: no outcomes, the reward is the judge's."))
    feedback_confidence: float | None = Field(description="The share of feedback_weight the feedback carried, in [0, 1].")
    email: TracedEmail | None
    turns: int


class IterationDetail(IterationOut):
    trajectories: list[TrajectoryOut]


class IterationList(Page[IterationOut]):
    """A run's recorded iterations, the baseline (0) first."""


class NodeScoresOut(BaseModel):
    iteration: int
    scenario_id: str | None = Field(None, description="The scenario whose scores these are; null: the mean over the run's scenarios.")
    scores: dict[str, float]
