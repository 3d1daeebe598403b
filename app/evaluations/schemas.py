"""`POST /evaluations`: policies compared on held-out prospects and, off-policy, on the drafts already sent."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from app.drafts.schemas import ProspectIn, unique_prospect_ids
from app.kit.pages import Page
from app.policies.schemas import EvaluationResult

MAX_POLICIES = 4
MAX_HELD_OUT = 200


class EvaluationStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE = (EvaluationStatus.QUEUED, EvaluationStatus.RUNNING)


class EvaluationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graph_id: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    policies: list[Annotated[str, StringConstraints(min_length=1, max_length=120)]] = Field(
        min_length=1, max_length=MAX_POLICIES, description="A policy id or its alias `<run_id>@<k>` each (kept, if it was not), of the graph (the champion "
                    "among them).")
    prospects: list[ProspectIn] | None = Field(None, min_length=1, max_length=MAX_HELD_OUT, description=(
        "Held-out prospects; default: the graph's scenarios that trained none of the policies."))

    @field_validator("policies")
    @classmethod
    def distinct(cls, policies: list[str]) -> list[str]:
        if len(set(policies)) != len(policies):
            raise ValueError("a policy appears twice")
        return policies

    @field_validator("prospects")
    @classmethod
    def unique_ids(cls, prospects: list[ProspectIn] | None) -> list[ProspectIn] | None:
        return None if prospects is None else unique_prospect_ids(prospects)


class EvaluationLinks(BaseModel):
    self: str


class EvaluationCreated(BaseModel):
    evaluation_id: str
    status: str
    links: EvaluationLinks


class EvaluationOut(BaseModel):
    evaluation_id: str
    graph_id: str
    policies: list[str] = Field(description="By alias, `<run_id>@<k>`, in the order given.")
    policy_ids: list[str] = Field(description="The same policies' own ids.")
    status: str = Field(description="queued, running, succeeded, failed or cancelled")
    result: EvaluationResult | None
    error: dict | None
    created_at: datetime
    finished_at: datetime | None


class EvaluationList(Page[EvaluationOut]):
    pass
