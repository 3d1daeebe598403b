"""A run's vocabulary: where it stands, where it failed, and why."""

from enum import StrEnum

from pydantic import BaseModel


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def active(self) -> bool:
        return not self.terminal


TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})
ACTIVE = frozenset(RunStatus) - TERMINAL


class Step(StrEnum):
    """Where a run failed: a step of the durable workflow."""

    START = "start"
    EMAIL = "email"
    GENERATE = "generate"
    SCORE = "score"
    TRAIN = "train"
    REWEIGHT = "reweight"
    PUBLISH = "publish"
    SEND = "send"  # the demo's simulated provider sends the published email
    WAIT = "wait"  # feedback_wait: for the published iteration's outcomes
    FINISH = "finish"


class RunError(BaseModel):
    message: str
    step: Step | None = None
