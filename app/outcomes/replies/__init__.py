"""What a reply means: its own text (quoted history, signatures and list footers cut) and its category.

`own_text` is the cutter (app.outcomes.replies.cutter); `classify_reply` the offline classifier
(app.outcomes.replies.classifier). Both are pure functions over the reply, with no I/O, so that the inbound parser's
worker processes call them within their budgets.
"""

from app.outcomes.replies.classifier import classify_reply
from app.outcomes.replies.cutter import own_text
from app.outcomes.replies.types import Classification, DecidedBy, ReplyCategory

__all__ = ["Classification", "DecidedBy", "ReplyCategory", "classify_reply", "own_text"]
