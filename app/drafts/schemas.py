"""Drafts: one email per prospect the loop never saw, written with a policy, in batches (see the contract)."""

from datetime import date, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StringConstraints, field_validator, model_validator

from app.events.ssrf import WebhookURL
from app.kit.pages import Page
from app.kit.untrusted_text import clean
from app.knowledge_graph.schemas import Sender
from app.outcomes.replies import ReplyCategory

MAX_PROSPECTS = 1000
NO_NUL = r"^[^\x00]*$"
NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"
Text = Annotated[str, StringConstraints(min_length=1, max_length=500, strip_whitespace=True, pattern=NO_NUL)]
Goal = Annotated[str, StringConstraints(min_length=1, max_length=5000, strip_whitespace=True, pattern=NO_NUL)]
ProspectId = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:@+\-]+$")]


CustomKey = Annotated[str, StringConstraints(min_length=1, max_length=100, strip_whitespace=True, pattern=NO_NUL)]
CustomValue = Annotated[str, StringConstraints(max_length=2000, strip_whitespace=True, pattern=NO_NUL)]
MAX_CUSTOM_FIELDS = 50
# A sales tool's names for the fields a prospect has, and the field each one fills
ALIASES = {"company_name": "company", "title": "role"}


class ProspectIn(BaseModel):
    """A prospect as sales tools export it: `first_name` + `last_name` or `name`, `title` or `role`, `company_name` or
    `company`; every other field is kept as a custom field (in `custom`) and comes back with the draft."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    id: ProspectId | None = Field(None, description="Yours (a CRM id); one is assigned when absent. Unique in a batch.")
    name: Text | None = Field(None, description="The name as written (\"Dr. Priya Nair\", \"Schmidt, Anna\"); default: "
                                                "`first_name` and `last_name`.")
    first_name: Text | None = Field(None, description="The name to greet by: when given it wins over reading `name`.")
    last_name: Text | None = None
    email: Annotated[str, StringConstraints(max_length=320, strip_whitespace=True, pattern=NO_CONTROL)] | None = None
    company: Text = Field(description="Or `company_name`.")
    role: Text | None = Field(None, description="Or `title`: the job title.")
    industry: Text | None = None
    pains: list[Text] = Field(default_factory=list, max_length=10, description=(
        "As your CRM holds them; may be empty when a role or an industry is given."))
    goal: Goal | None = Field(None, description="What the email asks for; default: the batch's `goal`, else the graph's "
                                                "offer for the prospect's role, else a generic ask.")
    custom: dict[CustomKey, CustomValue] = Field(default_factory=dict, description=(
        "Any other field of the prospect, returned with its draft (and in the CSV export)."))
    _sanitized: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _sales_tool_fields(cls, data: object) -> object:
        """`company_name` and `title` fill `company` and `role`; a field the service has no use for becomes custom."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        given = data.get("custom")
        custom = dict(given) if isinstance(given, dict) else {} if given is None else None
        for alias, field in ALIASES.items():
            if alias in data:
                value = data.pop(alias)
                if data.get(field) not in (None, "") and value not in (None, "") and value != data[field]:
                    raise ValueError(f"{alias} and {field} are the same field and differ: give one")
                if data.get(field) in (None, ""):
                    data[field] = value
        if custom is None:
            return data  # a `custom` that is not an object: its own error
        for key in [k for k in data if k not in cls.model_fields]:
            value = data.pop(key)
            if value is None:
                continue
            if isinstance(value, (dict, list)):
                raise ValueError(f"field {key!r}: a custom field holds text, a number or a boolean, not {type(value).__name__}")
            custom[str(key)] = str(value)
        if len(custom) > MAX_CUSTOM_FIELDS:
            raise ValueError(f"a prospect has at most {MAX_CUSTOM_FIELDS} custom fields ({len(custom)} given)")
        data["custom"] = custom
        return data

    @model_validator(mode="after")
    def _named_and_described(self) -> "ProspectIn":
        """Prospect text is data: every text field cleaned first (`app.kit.untrusted_text`), what went said in
        `_sanitized`; a required field with nothing left is refused, an optional one left out."""
        self._sanitized += sanitize(self, exempt={"id", "email"})  # validated again as a part of a request: kept
        if self.name is None:
            parts = [p for p in (self.first_name, self.last_name) if p]
            if not parts:
                raise ValueError("a prospect needs a name: `name`, or `first_name` and/or `last_name`")
            self.name = " ".join(parts)
        if not self.pains and not self.role and not self.industry:
            raise ValueError("a prospect without pains needs a role (`title`) or an industry to be written to")
        return self


def sanitize(model: BaseModel, exempt: set[str] = frozenset()) -> list[str]:
    """Cleans the model's text fields (and list-of-text fields, item by item; extra fields too) in place; returns what
    was removed, as `field: what` notes."""
    notes = []
    extra = model.__pydantic_extra__ or {}
    for name in [*type(model).model_fields, *extra]:
        value = getattr(model, name) if name in type(model).model_fields else extra[name]
        if name in exempt or value is None:
            continue
        field = type(model).model_fields.get(name)
        required = field is not None and field.is_required()
        if isinstance(value, str):
            cleaned, said = clean(value)
            if not said:
                continue
            if not cleaned and required:
                raise ValueError(f"{name}: nothing is left once {' and '.join(said)}")
            notes += [f"{name}: {note}" for note in said]
            value = cleaned or None
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            kept = []
            for index, item in enumerate(value):
                cleaned, said = clean(item)
                notes += [f"{name}[{index}]: {note}" for note in said]
                if cleaned:
                    kept.append(cleaned)
            if not kept and value and required:
                raise ValueError(f"{name}: nothing is left once the text that is no data is removed")
            value = kept
        else:
            continue
        if name in extra:
            extra[name] = value
        else:
            setattr(model, name, value)
    return notes


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

    graph_id: Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=NO_NUL)]
    policy: Annotated[str, StringConstraints(min_length=1, max_length=120, pattern=NO_NUL)] | None = Field(
        None, description="A policy id or its alias `<run_id>@<k>` (kept, if it was not); default: the graph's "
                          "deployment.")
    goal: Goal | None = Field(None, description="For prospects without one; default: the graph's offer for the "
                                                "prospect's role, else a generic ask.")
    sender: Sender | None = Field(None, description="Who signs the emails; default: the graph's `sender`, else the "
                                                    "SENDER_NAME setting, else the seller's team.")
    skip_low_fit: bool = Field(False, description="Draft no email for a prospect whose pains no fact of the graph answers "
                                                  "(its draft says why, with `fit: \"low\"`).")
    prospects: list[ProspectIn] = Field(min_length=1, max_length=MAX_PROSPECTS)
    webhook_url: WebhookURL | None = Field(None, description=(
        "Receives draft_batch.succeeded / draft_batch.failed / draft_batch.cancelled, signed."))
    seed: int = Field(0, ge=0, le=2**31 - 1)
    _goal_sanitized: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _goal_as_data(self) -> "DraftRequest":
        """The batch's goal is prospect text too: it is written into every email that has no goal of its own."""
        self._goal_sanitized += sanitize(self, exempt=set(type(self).model_fields) - {"goal"})
        return self

    @field_validator("prospects")
    @classmethod
    def unique_ids(cls, prospects: list[ProspectIn]) -> list[ProspectIn]:
        return unique_prospect_ids(prospects)


class BatchStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED = frozenset((BatchStatus.SUCCEEDED, BatchStatus.FAILED, BatchStatus.CANCELLED))


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
    sender: Sender | None = Field(None, description="Who signs its emails (null: the seller's team).")
    skip_low_fit: bool = False


class DraftEmail(BaseModel):
    subject: str
    body: str
    citations: list[str]
    ref: str
    message_id: str


class DraftProspect(BaseModel):
    id: str
    name: str
    first_name: str | None = None
    last_name: str | None = None
    email: str | None
    company: str
    role: str | None
    industry: str | None
    pains: list[str]
    goal: str | None = Field(description="What its email asks for (null: a generic ask).")
    custom: dict[str, str] = Field(default_factory=dict)


class Fit(StrEnum):
    """Whether the graph has facts that answer the prospect's pains."""

    HIGH = "high"
    LOW = "low"


class Suppressed(BaseModel):
    """Why no email was written: the prospect's address is on the tenant's suppression list."""

    reason: str
    until: date | None = Field(description="The last day it stays suppressed; null: for good.")


class DraftOut(BaseModel):
    position: int = Field(description="Its place in the batch, from 0: `after` for the page that follows it.")
    prospect: DraftProspect
    email: DraftEmail | None = Field(description="Null until the prospect is drafted, or when the policy wrote none.")
    policy: str = Field(description="The policy that wrote it, by its alias `<run_id>@<k>`.")
    policy_id: str
    judge_score: float | None
    variant: int = Field(description="Which of the deployment's policies wrote it (0: the one named).")
    propensity: float = Field(description="The probability this policy had of being chosen for the prospect.")
    like: str | None = Field(description="The training scenario the prospect was found most like (for reporting: its "
                                         "facts and goal are not reused).")
    fit: Fit | None = Field(None, description="`high` when facts of the graph answer the prospect's pains, `low` when none "
                                              "does (null until drafted).")
    fit_reason: str | None = Field(None, description="Why: the facts found for which pains, or the pains nothing answers.")
    sanitized: list[str] = Field(default_factory=list, description=(
        "What was removed from the prospect's fields before drafting, one note per field and kind (`company: control "
        "characters removed`): control characters, markup, links, payment instructions, instruction-like text."))
    suppressed: Suppressed | None = Field(None, description=(
        "Set when the prospect's address was suppressed (an unsubscribe, a complaint, a hard bounce, an out-of-office "
        "until its return date, or `POST /suppressions`) as it was drafted: `email` is then null."))


class DraftPage(Page[DraftOut]):
    pass


class ProspectOutcomes(BaseModel):
    prospect_id: str
    ref: str
    delivered: int
    opens: int
    clicks: int
    replies: int = Field(description="Verified replies: from the address the draft went to (at most one).")
    positive_replies: int = Field(description="Verified replies in a category the interest scale (REPLY_INTEREST) puts "
                                              "above 0.")
    replies_by_category: dict[str, int] = Field(description="Replies (auto-replies included) by category.")
    category: ReplyCategory | None = Field(description="The latest reply's category; null before any reply.")
    bounces: int
    unverified_replies: int = Field(0, description="Replies from other addresses: shown, never counted.")


class BatchOutcomes(BaseModel):
    data: list[ProspectOutcomes]


class BatchPage(Page[BatchOut]):
    pass
