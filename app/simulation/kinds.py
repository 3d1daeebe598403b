"""The world's vocabulary of reactions and reader traits."""

from enum import StrEnum


class ReplyKind(StrEnum):
    INTERESTED = "interested"
    MEETING = "meeting"
    QUESTION = "question"
    NOT_INTERESTED = "not_interested"
    UNSUBSCRIBE = "unsubscribe"
    REFERRAL = "referral"
    WRONG_PERSON = "wrong_person"
    OUT_OF_OFFICE = "out_of_office"


POSITIVE = frozenset({ReplyKind.INTERESTED, ReplyKind.MEETING})
NEGATIVE = frozenset({ReplyKind.NOT_INTERESTED, ReplyKind.UNSUBSCRIBE})


class Persuader(StrEnum):
    """A kind of detail that makes a claim believable to a reader."""

    NUMBER = "number"  # a figure: a percentage, a time saved, an amount
    PEER = "peer"  # a named customer in the reader's own industry
    INTEGRATION = "integration"  # a tool the reader's team runs
    PRICE = "price"


class Ask(StrEnum):
    """What an email asks of its reader."""

    MEETING = "meeting"
    RESOURCE = "resource"  # to be sent a guide, a report, a case study
    TRIAL = "trial"  # to try it: a sandbox, a pilot
    REPLY = "reply"  # to answer a question
