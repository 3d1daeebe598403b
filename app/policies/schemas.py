"""What a run has learned once an iteration was recorded, addressed as `<run_id>@<k>`, and the policy a graph writes with."""

import re
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field

from app.loop.schemas import RewardStats
from app.pages import Page

_POLICY_ID = re.compile(r"^(?P<run>[A-Za-z0-9_.:\-]{1,100})(?:@(?P<iteration>\d{1,9}))?$")


@dataclass(frozen=True)
class PolicyRef:
    """A policy id as given: a run and an iteration (None: the run's latest recorded one)."""

    run_id: str
    iteration: int | None

    @classmethod
    def parse(cls, text: str) -> "PolicyRef | None":
        """`run_…@k` or `run_…`; None for anything else."""
        match = _POLICY_ID.match(text.strip())
        if match is None:
            return None
        iteration = match["iteration"]
        return cls(match["run"], None if iteration is None else int(iteration))


def policy_id(run_id: str, iteration: int) -> str:
    return f"{run_id}@{iteration}"


class PolicyOut(BaseModel):
    id: str = Field(description="`<run_id>@<k>`: what the run had learned once iteration k was recorded.")
    run_id: str
    iteration: int
    graph_id: str
    backend: str
    training_step: int | None = Field(description="The checkpoint's training step (trainable backends); null otherwise.")
    created_at: datetime = Field(description="When iteration k was recorded.")
    reward: RewardStats | None = Field(description="The iteration's rewards; null for iteration 0, the untrained policy.")
    deployed: bool = Field(description="The graph's current deployment.")


class PolicyList(Page[PolicyOut]):
    pass


class DeploymentIn(BaseModel):
    policy: str = Field(min_length=1, max_length=120, description="`<run_id>@<k>`, or `<run_id>` for its latest iteration.")


class DeploymentRecord(BaseModel):
    policy: str
    deployed_at: datetime


class DeploymentOut(BaseModel):
    graph_id: str
    policy: str | None = Field(description="The policy drafts on this graph are written with; null: none deployed.")
    deployed_at: datetime | None
    history: list[DeploymentRecord] = Field(description="Every deployment of the graph, the current one first.")
