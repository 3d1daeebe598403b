"""What an outcome means: the category of a reply (or of a provider's unsubscribe, complaint or bounce event), what
that category is worth to learning (the interest scale), and whom it suppresses."""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

from app.outcomes.replies import Classification, DecidedBy, ReplyCategory
from app.outcomes.schemas import OutcomeEvent, OutcomeType, Sentiment

# Never counted, whatever the scale says: an away notice or a machine's answer says nothing of the email, and a bounce
# was no send at all.
NOT_COUNTED = frozenset({ReplyCategory.out_of_office, ReplyCategory.auto_reply, ReplyCategory.bounce})
# The guardrail's rate: a recipient who asked to hear no more (a complaint is filed under unsubscribe)
UNSUBSCRIBES = frozenset({ReplyCategory.unsubscribe})
REPLY_TYPES = (OutcomeType.REPLIED, OutcomeType.AUTO_REPLIED)
SENTIMENT_CATEGORY = {Sentiment.POSITIVE: ReplyCategory.interested, Sentiment.NEGATIVE: ReplyCategory.not_interested,
                      Sentiment.NEUTRAL: ReplyCategory.unknown}
PROVIDER_EVENTS = {OutcomeType.UNSUBSCRIBED: (ReplyCategory.unsubscribe, "unsubscribed"),
                   OutcomeType.COMPLAINED: (ReplyCategory.unsubscribe, "complaint (marked as spam)"),
                   OutcomeType.BOUNCED: (ReplyCategory.bounce, "hard bounce")}


@dataclass(frozen=True)
class InterestScale:
    """What each reply category is worth to learning (setting REPLY_INTEREST): above 0 a positive reply, below 0 a
    negative one; out-of-office, auto-replies and bounces count for nothing."""

    values: Mapping[ReplyCategory, float]

    @classmethod
    def of(cls, values: Mapping[str, float]) -> "InterestScale":
        return cls({ReplyCategory(name): float(value) for name, value in values.items()})

    def value(self, category: ReplyCategory | None) -> float:
        if category is None or category in NOT_COUNTED:
            return 0.0
        return self.values.get(category, 0.0)

    @property
    def positive(self) -> frozenset[ReplyCategory]:
        return frozenset(c for c in ReplyCategory if self.value(c) > 0)

    @property
    def negative(self) -> frozenset[ReplyCategory]:
        return frozenset(c for c in ReplyCategory if self.value(c) < 0)

    @property
    def top(self) -> float:
        """The highest value (a positive reply's weight is its value over this); 1 when no category is positive."""
        return max((self.value(c) for c in ReplyCategory), default=0.0) or 1.0

    @property
    def bottom(self) -> float:
        """The magnitude of the lowest value (a negative reply's weight is its magnitude over this); 1 when none is
        negative."""
        return -min((self.value(c) for c in ReplyCategory), default=0.0) or 1.0

    def gain(self, category: ReplyCategory | None) -> float:
        """A reply's weight among positive replies, in [0, 1]: its value over the highest."""
        return max(0.0, self.value(category)) / self.top

    def harm(self, category: ReplyCategory | None) -> float:
        """A reply's weight among negative replies, in [0, 1]: its value's magnitude over the lowest's."""
        return max(0.0, -self.value(category)) / self.bottom


def classified(event: OutcomeEvent, *, from_provider: bool) -> Classification | None:
    """The category an event carries by itself: a reply's as the caller gave it (`category`, else its `sentiment`), a
    provider's unsubscribe, complaint or bounce event's by its type. None for a reply with neither (an inbound reply
    is classified from its text) and for every other outcome."""
    if event.type in PROVIDER_EVENTS:
        category, reason = PROVIDER_EVENTS[event.type]
        return Classification(category, 1.0, DecidedBy.provider if from_provider else DecidedBy.caller, reason)
    if event.type == OutcomeType.AUTO_REPLIED and event.category is None:
        return Classification(ReplyCategory.auto_reply, 1.0, DecidedBy.caller, "reported as an auto-reply")
    if event.type not in REPLY_TYPES:
        return None
    if event.category is not None:
        return Classification(event.category, 1.0, DecidedBy.caller, "given by the caller",
                              event.returns_on if event.category == ReplyCategory.out_of_office else None)
    if event.sentiment is not None:
        category = SENTIMENT_CATEGORY[event.sentiment]
        return Classification(category, 0.0 if category == ReplyCategory.unknown else 1.0, DecidedBy.caller,
                              f"sentiment {event.sentiment.value}")
    return None


UNCLASSIFIED = Classification(ReplyCategory.unknown, 0.0, DecidedBy.rules, "no category, sentiment or text to read")


@dataclass(frozen=True)
class Hold:
    """A suppression an outcome asks for: for good (`until` None), or until a stated return date."""

    reason: str
    until: date | None


def suppression(event_type: OutcomeType, classification: Classification) -> Hold | None:
    """An unsubscribe, a complaint and a bounce (a hard one: providers report no other) suppress for good; an
    out-of-office with a return date until that date."""
    category = classification.category
    if event_type == OutcomeType.COMPLAINED:
        return Hold("complaint", None)
    if category in (ReplyCategory.unsubscribe, ReplyCategory.bounce):
        return Hold(category.value, None)
    if category == ReplyCategory.out_of_office and classification.returns_on is not None:
        return Hold(category.value, classification.returns_on)
    return None
