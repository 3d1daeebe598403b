"""What the workflow's steps hand each other: one pydantic model per step output.

DBOS checkpoints a step's output as its JSON form (see `workflow.workflow_step`), so a model
may gain a field with a default and a run checkpointed before still resumes.
"""

from datetime import datetime

from pydantic import BaseModel, Field

from app.agent.schemas import PublishedEmail, ScenarioContext
from app.loop.schemas import FeedbackWait, RewardStats, TrainingOutcome
from app.runs.status import RunStatus

Contexts = dict[str, ScenarioContext]  # what in-context learning distilled, per scenario
ScoresByScenario = dict[str, dict[str, float]]  # node scores per scenario


class StartState(BaseModel):
    status: RunStatus
    iterations_total: int
    next_iteration: int  # after the last recorded one, for a resumed run
    simulated_sends: bool = False  # the demo's provider sends each published email (feedback_source `simulated`)
    feedback_wait: FeedbackWait | None = None
    max_steps_off_policy: int = 0
    initial_context: Contexts | None = None  # a run started from a policy: the lessons it continues with


class WaitState(BaseModel):
    """Where a wait for outcomes stands; `until` is recorded once, so a recovered run keeps its deadline."""

    until: datetime
    delivered: int
    done: bool
    remaining_s: float


class GenerationResult(BaseModel):
    started_at: datetime
    metrics: dict[str, float]
    trace_url: str | None = None
    rewards: RewardStats
    sampled_step: int | None = None  # the policy step its rollouts were sampled from (None: a model not trained)


class ReweightResult(BaseModel):
    changed: ScoresByScenario = Field(default_factory=dict)  # only the scores that moved
    context: Contexts | None = None
    seconds: float = 0.0


class EmailResult(BaseModel):
    email: PublishedEmail
    started_at: datetime
    seconds: float
    attempts: int = 1  # rollouts it took: the greedy one, then sampled ones when that wrote no email
    source: str = "greedy"  # greedy, sampled, best_of_iteration (the iteration's best-reward email) or chosen_by_outcomes


class IterationRecord(BaseModel):
    """One iteration as the workflow records it; the stored row and the API's `IterationOut` follow its fields."""

    iteration: int
    email: PublishedEmail | None
    rewards: RewardStats | None = None
    training: TrainingOutcome | None = None
    changed: ScoresByScenario = Field(default_factory=dict, exclude=True)  # stored as node scores, not in the row
    metrics: dict[str, float]
    trace_url: str | None = None
    context: Contexts | None = None
    started_at: datetime
