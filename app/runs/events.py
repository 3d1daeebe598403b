"""The catalogue of run events: one typed payload per event type.

The same payload is an event's `data` in `GET /runs/{id}/events`, in the live stream, and in
the webhook POSTed for it; the OpenAPI document lists each (the webhooks in its `webhooks`
section), so a client generator sees every shape.
"""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal, Union

from pydantic import BaseModel, Field, create_model

from app.agent.schemas import FinalEmail, PublishedEmail
from app.events.schemas import Catalogue, EventData
from app.loop.schemas import RewardStats
from app.stats.intervals import Interval
from app.kit.pages import Page
from app.runs.status import RunError, RunStatus


class EventType(StrEnum):
    RUN_STARTED = "run.started"
    ITERATION_COMPLETED = "iteration.completed"
    RUN_SUCCEEDED = "run.succeeded"
    RUN_FAILED = "run.failed"
    RUN_CANCELLED = "run.cancelled"
    RUN_WAITING = "run.waiting"
    POLICY_PROMOTED = "policy.promoted"
    POLICY_ROLLED_BACK = "policy.rolled_back"


class Waiting(BaseModel):
    """What a run waits for before scoring its next iteration."""

    iteration: int = Field(description="The published iteration whose emails' outcomes it waits for.")
    min_delivered: int
    delivered: int = Field(description="Delivered events of those emails when the wait began.")
    until: datetime = Field(description="When it goes on with what arrived.")


class RunStartedData(EventData):
    type = EventType.RUN_STARTED
    status: Literal[RunStatus.RUNNING] = RunStatus.RUNNING
    attempt: int = Field(description="1, then one more for each resume of a failed run.")


class IterationCompletedData(EventData):
    type = EventType.ITERATION_COMPLETED
    iteration: int = Field(description="0 is the baseline email, written before any training.")
    email: PublishedEmail | None
    rewards: RewardStats | None = Field(description="null for the baseline.")
    node_scores: dict[str, float] = Field(description="Every node's score (see `truncated`).")
    truncated: bool = Field(
        False, description="True above 2,000 nodes: node_scores then holds the 500 highest plus the iteration's changes."
    )


class RunEndedData(EventData):
    iterations_completed: int


class RunSucceededData(RunEndedData):
    type = EventType.RUN_SUCCEEDED
    status: Literal[RunStatus.SUCCEEDED] = RunStatus.SUCCEEDED
    final_email: FinalEmail | None = Field(description="The last iteration's email, with its iteration.")
    best_email: FinalEmail | None = Field(None, description="The best-scoring published email, with its iteration.")


class RunFailedData(RunEndedData):
    type = EventType.RUN_FAILED
    status: Literal[RunStatus.FAILED] = RunStatus.FAILED
    error: RunError


class RunCancelledData(RunEndedData):
    type = EventType.RUN_CANCELLED
    status: Literal[RunStatus.CANCELLED] = RunStatus.CANCELLED
    final_email: FinalEmail | None = Field(description="The last email published before the cancel, with its iteration.")
    best_email: FinalEmail | None = Field(None, description="The best-scoring email published before the cancel.")


class RunWaitingData(EventData):
    type = EventType.RUN_WAITING
    waiting: Waiting


class PromotionEvidence(BaseModel):
    """What the evaluation showed of the new champion against the one it replaced, as the gate read it."""

    estimator: Literal["DR", "SNIPS"] = Field(description="DR where the outcome model could predict, else SNIPS.")
    policy: Interval = Field(description="The promoted policy's off-policy reply rate.")
    replaced: Interval = Field(description="The replaced champion's.")
    ahead: bool = Field(description="The 90 % interval of the difference between the two lies above zero.")
    sequential: bool = Field(False, description="That interval was the always-valid one (the deployment's `sequential`).")


# The deployment (app.policies, above this package) tells these onto the promoted policy's run, so the run's events,
# its live stream and its webhook carry them (docs/architecture/decisions.md).
class PolicyPromotedData(EventData):
    """A policy of this finished run became its graph's champion, by a `PUT` of the deployment or by auto-promotion,
    with the evaluation that justified it."""

    type = EventType.POLICY_PROMOTED
    graph_id: str
    policy: str = Field(description="The new champion, `<run_id>@<k>` (a policy of this run).")
    replaced: str | None = Field(description="The champion it replaced; null for the graph's first deployment.")
    trigger: Literal["request", "auto_promote"] = Field(description=(
        "`request`: a `PUT /graphs/{graph_id}/deployment`; `auto_promote`: an evaluation put it ahead of the champion."))
    gated: bool = Field(description="The deployment required evidence for a new champion (`require_evidence`).")
    forced: bool = Field(description="Promoted by `force` against, or without, the evidence the gate asked for.")
    evaluation: str | None = Field(description="The evaluation the gate read (`GET /evaluations/{id}`); null when the "
                                               "promotion was not gated, or forced with no evaluation of both.")
    evidence: PromotionEvidence | None = Field(description="What that evaluation showed; null without one.")
    deployed_at: datetime = Field(description="The deployment's `deployed_at` in the graph's history.")


class PolicyRolledBackData(PolicyPromotedData):
    """A policy of this finished run became its graph's champion again: a rollback, with what justified it."""

    type = EventType.POLICY_ROLLED_BACK


PAYLOADS: dict[EventType, type[EventData]] = {
    data.type: data for data in (RunStartedData, IterationCompletedData, RunWaitingData, RunSucceededData, RunFailedData,
                                 RunCancelledData, PolicyPromotedData, PolicyRolledBackData)
}
TERMINAL_EVENTS = frozenset({EventType.RUN_SUCCEEDED, EventType.RUN_FAILED, EventType.RUN_CANCELLED})
CATALOGUE = Catalogue(PAYLOADS, TERMINAL_EVENTS)


def _envelope(suffix: str, payload: type[EventData], **fields) -> type[BaseModel]:
    name = payload.__name__.removesuffix("Data") + suffix
    return create_model(name, type=(Literal[payload.type.value], ...), **fields, data=(payload, ...))


EVENT_MODELS = [
    _envelope("Event", payload, id=(str, ...), seq=(int, ...), created_at=(datetime, ...)) for payload in PAYLOADS.values()
]
WEBHOOK_MODELS = {
    event_type: _envelope("Webhook", payload, timestamp=(datetime, Field(description="When the event happened.")))
    for event_type, payload in PAYLOADS.items()
}
AnyEvent = Annotated[Union[tuple(EVENT_MODELS)], Field(discriminator="type")]  # noqa: UP007


class EventList(Page[AnyEvent]):
    """A run's events in seq order."""
