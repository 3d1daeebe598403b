"""What an outcome is, whichever way it arrived: `POST /outcomes`, a provider's webhook, or a reply."""

from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    model_validator,
)

from app.outcomes.replies import DecidedBy, ReplyCategory


class OutcomeType(StrEnum):
    DELIVERED = "delivered"
    OPENED = "opened"
    CLICKED = "clicked"
    REPLIED = "replied"
    BOUNCED = "bounced"
    COMPLAINED = "complained"
    UNSUBSCRIBED = "unsubscribed"
    AUTO_REPLIED = "auto_replied"  # recorded, never counted as a reply


class Sentiment(StrEnum):
    POSITIVE = "positive"
    NEUTRAL = "neutral"
    NEGATIVE = "negative"


# PostgreSQL text cannot hold NUL: refused here, as a 422 naming the field, rather than by the database
Text = Annotated[str, StringConstraints(min_length=1, max_length=500, strip_whitespace=True, pattern=r"^[^\x00]*$")]
EARLIEST, LATEST = datetime(1970, 1, 1, tzinfo=UTC), datetime(9000, 1, 1, tzinfo=UTC)


def _timestamp_text(value: object) -> object:
    """A timestamp is text (or a datetime in process), not a number whose unit would be a guess."""
    if isinstance(value, (int, float)):
        raise ValueError("occurred_at must be an ISO 8601 timestamp with its zone, not a number")
    return value


def _in_utc(moment: datetime) -> datetime:
    """Stored in UTC: a time whose zone carries it past year 9999 (`9999-12-31T23:59:59-14:00`) or before the
    Unix epoch is no time an email had an outcome at."""
    try:
        moment = moment.astimezone(UTC)
    except OverflowError:
        raise ValueError("occurred_at is out of range once converted to UTC") from None
    if not EARLIEST <= moment < LATEST:
        raise ValueError(f"occurred_at must lie between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d}")
    return moment


class OutcomeEvent(BaseModel):
    """One thing that happened to one sent email, as the sender reports it."""

    model_config = ConfigDict(extra="forbid")

    ref: Text | None = Field(description="The email's `ref` (`eml_…`), as sent in `codreamer_ref`; null when the "
                                         "sender's event carried none (counted as unattributed).")
    type: OutcomeType
    occurred_at: Annotated[AwareDatetime, BeforeValidator(_timestamp_text), AfterValidator(_in_utc)] = Field(
        description="ISO 8601 with its zone (`2026-11-20T09:30:00Z`).")
    id: Text = Field(description="The sender's event id: an event seen before (per tenant) counts once.")
    recipient: Text = Field(description="Any stable key of the recipient (an address); stored only as a salted hash.")
    machine: StrictBool = Field(False, description="A machine open or click (a privacy proxy's prefetch, a link scanner).")
    sentiment: Sentiment | None = Field(None, description=(
        "Optional, on a reply: `positive` files it as `interested`, `negative` as `not_interested`, `neutral` as "
        "`unknown` (prefer `category`)."))
    category: ReplyCategory | None = Field(None, description=(
        "Optional, on a reply: what it meant, as your team read it (`decided_by: caller`)."))
    returns_on: date | None = Field(None, description=(
        "Optional, on an `out_of_office` reply: the stated return date; the recipient is suppressed until then."))

    @model_validator(mode="after")
    def _meaning_of_a_reply(self) -> "OutcomeEvent":
        if self.category is not None and self.type not in (OutcomeType.REPLIED, OutcomeType.AUTO_REPLIED):
            raise ValueError(f"category describes a reply, not a {self.type.value!r} event")
        if self.returns_on is not None and self.category != ReplyCategory.out_of_office:
            raise ValueError("returns_on goes with the category 'out_of_office'")
        return self


MAX_EVENTS_PER_REQUEST = 1000  # a batch per request (SendGrid batches its webhooks about as large)


class OutcomeBatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    events: list[OutcomeEvent] = Field(min_length=1, max_length=MAX_EVENTS_PER_REQUEST)


class IngestResult(BaseModel):
    accepted: int = Field(description="Events stored for the first time.")
    duplicates: int = Field(description="Events whose id was seen before (for this tenant), counted once.")
    unattributed: int = Field(description="Events with no ref, or one the tenant does not know: acknowledged, not stored.")


class BasicAuth(BaseModel):
    username: str
    password: str


class SentEmailOutcomes(BaseModel):
    """What happened to one sent email; counts are distinct recipients, rates are over `delivered`."""

    iteration: int
    ref: str
    sends: int = Field(description="Recipients with any event.")
    delivered: int
    opens: int = Field(description="Human opens (machine opens are left out).")
    machine_opens: int
    clicks: int = Field(description="Human clicks.")
    replies: int = Field(description="Verified replies (auto-replies are left out): at most one per recipient.")
    positive_replies: int = Field(description="Verified replies in a category the interest scale (REPLY_INTEREST) puts "
                                              "above 0.")
    replies_by_category: dict[str, int] = Field(description="Replies (auto-replies included) by category.")
    bounces: int
    unverified_replies: int = Field(0, description=(
        "Replies from addresses the email did not go to (see which replies count): shown, never counted."))
    open_rate: float | None
    reply_rate: float | None
    reply_rate_interval: tuple[float, float] | None = Field(description="95 % Wilson interval of the reply rate.")
    judge_score: float | None


class Calibration(BaseModel):
    spearman: float | None = Field(description="Rank correlation of judge score and reply rate over the sent emails "
                                               "(null below 5 emails with both).")
    n: int


class RunOutcomes(BaseModel):
    data: list[SentEmailOutcomes]
    calibration: Calibration


class ReplyOut(BaseModel):
    """One reply (an auto-reply, an out-of-office or a delivery report at the inbound address included) and what it
    meant."""

    id: str = Field(description="`rpl_…`: relabel it with `PATCH /replies/{id}`.")
    ref: str = Field(description="The email it answers.")
    prospect_id: str | None = Field(description="A draft's prospect; null for a run's email.")
    iteration: int | None = Field(description="A run's iteration; null for a draft.")
    category: ReplyCategory
    confidence: float = Field(description="0..1; 0 exactly for `unknown`.")
    decided_by: DecidedBy
    reason: str | None = Field(description="What decided it, for a person to read.")
    received_at: datetime = Field(description="When the reply was sent (its Date), as the sender or provider dated it.")
    returns_on: date | None = Field(description="An out-of-office's stated return date.")
    text: str | None = Field(description="The reply's own text (quoted history cut); only with STORE_REPLY_TEXT=true.")


class ReplyList(BaseModel):
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)

    data: list[ReplyOut]
    has_more: bool = Field(False, description="More follow: ask again with `after` = the last reply's id.")


class ReplyRelabel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    category: ReplyCategory = Field(description="What the reply meant, as your team reads it; learning reads this.")


EmailAddress = Annotated[str, StringConstraints(min_length=3, max_length=320, strip_whitespace=True,
                                                pattern=r"^[^\x00\s@]+@[^\x00\s@]+$")]


class SuppressionsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    emails: list[EmailAddress] = Field(min_length=1, max_length=MAX_EVENTS_PER_REQUEST)
    reason: str = Field("manual", min_length=1, max_length=200, pattern=r"^[^\x00]*$",
                        description="Why, in your words (the service's own: unsubscribe, complaint, bounce, "
                                    "out_of_office).")


class SuppressionsAdded(BaseModel):
    suppressed: int = Field(description="Addresses now suppressed for good (an address given twice counts once).")


class SuppressionOut(BaseModel):
    reason: str
    since: datetime = Field(description="When it was first suppressed.")
    until: date | None = Field(description="The last day it stays suppressed (an out-of-office's return date); null: "
                                           "for good.")
