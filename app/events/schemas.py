"""The catalogue of run events: one typed payload per event type.

The same payload is an event's `data` in `GET /runs/{id}/events`, in the live stream, and in
the webhook POSTed for it; the OpenAPI document lists each (the webhooks in its `webhooks`
section), so a client generator sees every shape.
"""

from datetime import datetime
from enum import StrEnum
from typing import Annotated, ClassVar, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from app.agent.schemas import FinalEmail, PublishedEmail
from app.loop.schemas import RewardStats


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class Step(StrEnum):
    """Where a run failed: a step of the durable workflow."""

    START = "start"
    EMAIL = "email"
    GENERATE = "generate"
    SCORE = "score"
    TRAIN = "train"
    REWEIGHT = "reweight"
    PUBLISH = "publish"
    FINISH = "finish"


class RunError(BaseModel):
    message: str
    step: Step | None = None


class EventType(StrEnum):
    RUN_STARTED = "run.started"
    ITERATION_COMPLETED = "iteration.completed"
    RUN_SUCCEEDED = "run.succeeded"
    RUN_FAILED = "run.failed"
    RUN_CANCELLED = "run.cancelled"


class EventData(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: ClassVar[EventType]

    run_id: str
    seq: int = Field(description="The event's position in its run, from 1; also the SSE id.")


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


PAYLOADS: dict[EventType, type[EventData]] = {
    data.type: data for data in (RunStartedData, IterationCompletedData, RunSucceededData, RunFailedData, RunCancelledData)
}
TERMINAL_EVENTS = frozenset({EventType.RUN_SUCCEEDED, EventType.RUN_FAILED, EventType.RUN_CANCELLED})


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


class EventList(BaseModel):
    data: list[AnyEvent]
    has_more: bool


class AttemptOut(BaseModel):
    attempt: int = Field(description="1 for the first attempt of the event, then one more for each retry.")
    at: datetime = Field(description="When the attempt started.")
    status_code: int | None = Field(description="The receiver's answer; null when there was none (see `error`).")
    error: str | None = Field(description="Why the attempt failed (a non-2xx answer, a timeout, a refused address, ...); null when delivered.")
    duration_ms: float = Field(description="From the address check to the end of the answer, or to the deadline.")


class DeliveryOut(BaseModel):
    event_id: str
    type: str
    attempts: int
    status: Literal["pending", "delivered", "failed"]
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: datetime | None
    attempts_log: list[AttemptOut] = Field(default_factory=list, description="Every attempt, oldest first.")


class DeliveryList(BaseModel):
    data: list[DeliveryOut]
