"""The shapes a reply's meaning is told in."""

from dataclasses import dataclass
from datetime import date
from enum import StrEnum


class ReplyCategory(StrEnum):
    meeting = "meeting"  # agrees to, proposes or books a call or meeting
    interested = "interested"  # positive, wants more, without a meeting yet
    question = "question"  # asks something before deciding
    referral = "referral"  # not the right person, and names who is
    wrong_person = "wrong_person"  # not the right person, naming no one
    not_interested = "not_interested"  # declines
    unsubscribe = "unsubscribe"  # asks to be removed, or complains of the mail itself
    out_of_office = "out_of_office"  # away; `returns_on` when a return date is stated
    auto_reply = "auto_reply"  # any other machine answer (ticket receipts, "this address is no longer monitored")
    bounce = "bounce"  # a delivery report (the email did not reach its recipient)
    unknown = "unknown"  # a language the classifier does not read, or no signal: confidence 0


class DecidedBy(StrEnum):
    rules = "rules"  # the offline classifier
    caller = "caller"  # a person relabelled it (POST /outcomes, a relabel)
    provider = "provider"  # the email provider's own event (unsubscribe, complaint, bounce)


@dataclass(frozen=True)
class Classification:
    category: ReplyCategory
    confidence: float  # 0..1; 0 exactly when the category is `unknown`
    decided_by: DecidedBy
    reason: str  # what decided it, for a person to read ("header Auto-Submitted: auto-replied", 'phrase "not interested"')
    returns_on: date | None = None  # out_of_office only: the return date the reply states
