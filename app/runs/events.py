"""The catalogue of run events: one typed payload per event type.

The same payload is an event's `data` in `GET /runs/{id}/events`, in the live stream, and in
the webhook POSTed for it; the OpenAPI document lists each (the webhooks in its `webhooks`
section), so a client generator sees every shape.
"""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal, Union

from pydantic import BaseModel, Field

from app.agent.schemas import FinalEmail, PublishedEmail
from app.events.schemas import Catalogue, RunEventData
from app.kit.pages import Page
from app.loop.schemas import RewardStats
from app.outcomes.replies import ReplyCategory
from app.runs.status import RunError, RunStatus


class EventType(StrEnum):
    RUN_STARTED = "run.started"
    ITERATION_COMPLETED = "iteration.completed"
    RUN_SUCCEEDED = "run.succeeded"
    RUN_FAILED = "run.failed"
    RUN_CANCELLED = "run.cancelled"
    RUN_WAITING = "run.waiting"
    REPLY_RECEIVED = "reply.received"


class Waiting(BaseModel):
    """What a run waits for before scoring its next iteration."""

    iteration: int = Field(description="The published iteration whose emails' outcomes it waits for.")
    min_delivered: int
    delivered: int = Field(description="Delivered events of those emails when the wait began.")
    until: datetime = Field(description="When it goes on with what arrived.")


class RunStartedData(RunEventData):
    type = EventType.RUN_STARTED
    status: Literal[RunStatus.RUNNING] = RunStatus.RUNNING
    attempt: int = Field(description="1, then one more for each resume of a failed run.")


class IterationCompletedData(RunEventData):
    type = EventType.ITERATION_COMPLETED
    iteration: int = Field(description="0 is the baseline email, written before any training.")
    email: PublishedEmail | None
    rewards: RewardStats | None = Field(description="null for the baseline.")
    node_scores: dict[str, float] = Field(description="Every node's score (see `truncated`).")
    truncated: bool = Field(
        False, description="True above 2,000 nodes: node_scores then holds the 500 highest plus the iteration's changes."
    )


class RunEndedData(RunEventData):
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


class RunWaitingData(RunEventData):
    type = EventType.RUN_WAITING
    waiting: Waiting


class RunReplyReceivedData(RunEventData):
    """A reply to one of the run's emails, with what it meant, so that a CRM can route it at once (also after the run
    ended)."""

    type = EventType.REPLY_RECEIVED
    ref: str = Field(description="The email it answers.")
    category: ReplyCategory
    confidence: float
    iteration: int = Field(description="The iteration that wrote the email.")


PAYLOADS: dict[EventType, type[RunEventData]] = {
    data.type: data for data in (RunStartedData, IterationCompletedData, RunWaitingData, RunSucceededData, RunFailedData,
                                 RunCancelledData, RunReplyReceivedData)
}
TERMINAL_EVENTS = frozenset({EventType.RUN_SUCCEEDED, EventType.RUN_FAILED, EventType.RUN_CANCELLED})
CATALOGUE = Catalogue(PAYLOADS, TERMINAL_EVENTS)

AnyEvent = Annotated[Union[tuple(CATALOGUE.event_models())], Field(discriminator="type")]  # noqa: UP007


class EventList(Page[AnyEvent]):
    """A run's events in seq order."""
