"""The reply's own text: what its sender wrote, without the quoted history, signatures and list footers."""

from app.outcomes import inbound


def own_text(raw_text_or_html: str, *, html: bool = False, max_chars: int = inbound.Limits.max_text_chars) -> str:
    """The reply's own text, from its text/plain body (or its text/html one, `html=True`)."""
    text = inbound.html_text(raw_text_or_html) if html else raw_text_or_html
    return inbound.new_text(text, max_chars)
