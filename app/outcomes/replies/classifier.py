"""The offline classifier: rules over the reply's own text and its headers."""

from collections.abc import Mapping
from datetime import datetime

from app.outcomes.replies.types import Classification, DecidedBy, ReplyCategory


def classify_reply(own_text: str, headers: Mapping[str, str], received_at: datetime) -> Classification:
    """The reply's category; `own_text` is the reply's own text (see `own_text`), `headers` its header fields
    (names case-insensitive), `received_at` when it came (a stated return date is read relative to it)."""
    return Classification(ReplyCategory.unknown, 0.0, DecidedBy.rules, "no rule matched")
