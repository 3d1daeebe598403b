"""What an outcome is, whichever way it arrived: `POST /outcomes`, a provider's webhook, or a reply."""

from datetime import UTC, datetime
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
)


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
    sentiment: Sentiment | None = Field(None, description="Optional, on a reply.")


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
    positive_replies: int
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
