"""What a reply means: its own text (quoted history, signatures and list footers cut) and its category.

`own_text` is the cutter (app.outcomes.replies.cutter); `classify_reply` the offline classifier
(app.outcomes.replies.classifier). Both are pure functions over the reply, with no I/O, so that the inbound parser's
worker processes call them within their budgets.
"""

from app.outcomes.replies.classifier import classify_reply
from app.outcomes.replies.cutter import MAX_TEXT_CHARS, cut_text
from app.outcomes.replies.html import html_text
from app.outcomes.replies.types import Classification, DecidedBy, ReplyCategory

__all__ = ["Classification", "DecidedBy", "ReplyCategory", "classify_reply", "own_text"]


def own_text(raw_text_or_html: str, *, html: bool = False, max_chars: int = MAX_TEXT_CHARS) -> str:
    """The reply's own text, from its text/plain body (or its text/html one, `html=True`), of its first `max_chars`
    characters (an HTML body: of 4 × `max_chars`, the markup's share)."""
    text = html_text(raw_text_or_html[:max_chars * 4]) if html else raw_text_or_html
    return cut_text(text, max_chars)
