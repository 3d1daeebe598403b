"""What an outcome is, whichever way it arrived: `POST /outcomes`, a provider's webhook, or a reply."""

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints


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


class Provider(StrEnum):
    SENDGRID = "sendgrid"
    MAILGUN = "mailgun"
    POSTMARK = "postmark"
    RESEND = "resend"


Text = Annotated[str, StringConstraints(min_length=1, max_length=500, strip_whitespace=True)]


class OutcomeEvent(BaseModel):
    """One thing that happened to one sent email, as the sender reports it."""

    model_config = ConfigDict(extra="forbid")

    ref: Text | None = Field(description="The email's `ref` (`eml_…`), as sent in `codreamer_ref`; null when the "
                                         "sender's event carried none (counted as unattributed).")
    type: OutcomeType
    occurred_at: datetime
    id: Text = Field(description="The sender's event id: an event seen before (per tenant) counts once.")
    recipient: Text = Field(description="Any stable key of the recipient (an address); stored only as a salted hash.")
    machine: bool = Field(False, description="A machine open or click (a privacy proxy's prefetch, a link scanner).")
    sentiment: Sentiment | None = Field(None, description="Optional, on a reply.")
