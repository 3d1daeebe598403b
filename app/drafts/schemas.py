"""Drafts: one email per prospect the loop never saw, written with a policy, in batches (see the contract)."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from app.events.ssrf import WebhookURL
from app.kit.pages import Page

MAX_PROSPECTS = 1000
NO_NUL = r"^[^\x00]*$"
Text = Annotated[str, StringConstraints(min_length=1, max_length=500, strip_whitespace=True, pattern=NO_NUL)]
Goal = Annotated[str, StringConstraints(min_length=1, max_length=5000, strip_whitespace=True, pattern=NO_NUL)]
ProspectId = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:@+\-]+$")]


class ProspectIn(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: ProspectId | None = Field(None, description="Yours (a CRM id); one is assigned when absent. Unique in a batch.")
    name: Text
    email: Annotated[str, StringConstraints(max_length=320, strip_whitespace=True, pattern=NO_NUL)] | None = None
    company: Text
    role: Text
    industry: Text
    pains: list[Text] = Field(min_length=1, max_length=10)
    goal: Goal | None = Field(None, description="What the email asks for; default: the batch's `goal`.")


def unique_prospect_ids(prospects: list[ProspectIn]) -> list[ProspectIn]:
    """Given ids are unique, and none is the `p<N>` a prospect without one at position N − 1 is given."""
    seen: set[str] = set()
    for position, prospect in enumerate(prospects):
        if prospect.id is not None:
            if prospect.id in seen:
                raise ValueError(f"prospect id {prospect.id!r} appears twice (again at position {position})")
            seen.add(prospect.id)
    for position, prospect in enumerate(prospects):
        if prospect.id is None and f"p{position + 1}" in seen:
            raise ValueError(f"prospect id 'p{position + 1}' is given to another prospect, and is the id the one "
                             f"without an id at position {position} gets: give that one an id")
    return prospects


class DraftRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    graph_id: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    policy: Annotated[str, StringConstraints(min_length=1, max_length=120)] | None = Field(
        None, description="A policy id or its alias `<run_id>@<k>` (kept, if it was not); default: the graph's "
                          "deployment.")
    goal: Goal | None = Field(None, description="For prospects without one; default: the training scenarios' first goal.")
    prospects: list[ProspectIn] = Field(min_length=1, max_length=MAX_PROSPECTS)
    webhook_url: WebhookURL | None = Field(None, description="Receives draft_batch.succeeded / draft_batch.failed, signed.")
    seed: int = Field(0, ge=0, le=2**31 - 1)

    @field_validator("prospects")
    @classmethod
    def unique_ids(cls, prospects: list[ProspectIn]) -> list[ProspectIn]:
        return unique_prospect_ids(prospects)


class BatchStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class BatchLinks(BaseModel):
    self: str
    drafts: str


class BatchCreated(BaseModel):
    batch_id: str
    status: BatchStatus
    count: int
    webhook_secret: str | None = Field(None, description="Present only when webhook_url was given, shown once.")
    links: BatchLinks


class BatchOut(BaseModel):
    batch_id: str
    graph_id: str
    policy: str = Field(description="The policy it drafts with, by its alias `<run_id>@<k>`.")
    policy_id: str = Field(description="The same policy's own id: it answers once its run is deleted.")
    status: BatchStatus
    count: int
    completed: int
    created_at: datetime
    finished_at: datetime | None
    error: dict | None


class DraftEmail(BaseModel):
    subject: str
    body: str
    citations: list[str]
    ref: str
    message_id: str


class DraftProspect(BaseModel):
    id: str
    name: str
    email: str | None
    company: str
    role: str
    industry: str
    pains: list[str]
    goal: str


class DraftOut(BaseModel):
    position: int = Field(description="Its place in the batch, from 0: `after` for the page that follows it.")
    prospect: DraftProspect
    email: DraftEmail | None = Field(description="Null until the prospect is drafted, or when the policy wrote none.")
    policy: str = Field(description="The policy that wrote it, by its alias `<run_id>@<k>`.")
    policy_id: str
    judge_score: float | None
    variant: int = Field(description="Which of the deployment's policies wrote it (0: the one named).")
    propensity: float = Field(description="The probability this policy had of being chosen for the prospect.")
    like: str | None = Field(description="The training scenario the prospect was found most like (its node scores and "
                                         "lessons were used).")


class DraftPage(Page[DraftOut]):
    pass


class ProspectOutcomes(BaseModel):
    prospect_id: str
    ref: str
    delivered: int
    opens: int
    clicks: int
    replies: int
    positive_replies: int
    bounces: int


class BatchOutcomes(BaseModel):
    data: list[ProspectOutcomes]


class BatchPage(Page[BatchOut]):
    pass
