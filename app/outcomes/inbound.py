"""Replies to the emails the service wrote, from the raw MIME message an inbound route receives.

A reply is attributed to its email by the ref (`eml_…`) in the Message-ID the email was sent with,
`<eml_…@DOMAIN>`, which the reply quotes in `In-Reply-To` / `References`; failing that, by a plus-address
(`anything+eml_…@…`) the reply was sent to. Auto-replies (out of office, vacation, list robots) are
flagged so that they are recorded but never counted as replies.

The stdlib `email` package parses the message; `mail-parser-reply` cuts the quoted history and the
"On … wrote:" block from the new text.
"""

import email
import email.policy
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import getaddresses, parsedate_to_datetime
from html.parser import HTMLParser

from mailparser_reply import EmailReplyParser
from pydantic import BaseModel, ConfigDict

# the ref: "eml_" and 20 lower-case base32 characters (digits allowed, whichever base32 alphabet made it)
_REF = r"eml_[a-z0-9]{20}"
_MESSAGE_ID = re.compile(rf"<({_REF})@([^<>\s@]+)>", re.IGNORECASE)
_PLUS_ADDRESS = re.compile(rf"\+({_REF})@", re.IGNORECASE)
_AUTO_PRECEDENCE = {"auto_reply", "bulk", "junk"}
_QUOTE_LANGUAGES = ["en", "de", "fr", "es", "it", "nl"]  # the "On … wrote:" lines cut, in these languages


class InboundReply(BaseModel):
    model_config = ConfigDict(frozen=True)

    ref: str | None  # the email replied to; None when the reply names none of ours
    message_id: str | None  # the reply's own Message-ID, as in its header
    auto: bool  # an auto-reply: recorded, never counted as a reply
    sender: str | None  # the From address
    occurred_at: datetime  # the reply's Date (UTC when it names no zone), else when it was parsed
    text: str  # the new text, quoted history and "On … wrote:" blocks removed


class _Headers:
    """Header values as strings: decoded by policy.default (RFC 2047 words, UTF-8), or, where its structured
    parser raises on a malformed value (it does on some message ids and addresses), as compat32 reads them."""

    def __init__(self, raw: bytes, message: EmailMessage):
        self.message = message
        self.fallback: Message = BytesParser(policy=email.policy.compat32).parsebytes(raw, headersonly=True)

    def __contains__(self, name: str) -> bool:
        return name in self.message

    def all(self, name: str) -> list[str]:
        try:
            return [str(value) for value in self.message.get_all(name, [])]
        except Exception:
            return [str(value) for value in self.fallback.get_all(name, [])]

    def first(self, name: str) -> str | None:
        values = self.all(name)
        return values[0].strip() if values else None


def _ref_from_ids(value: str | None, domain: str) -> str | None:
    for ref, id_domain in _MESSAGE_ID.findall(value or ""):
        if id_domain.lower() == domain.lower():
            return ref.lower()
    return None


def _ref_from_addresses(headers: _Headers) -> str | None:
    for name in ("To", "Cc", "Delivered-To"):
        for _, address in getaddresses(headers.all(name)):
            match = _PLUS_ADDRESS.search(address)
            if match:
                return match.group(1).lower()
    return None


def _is_auto(headers: _Headers) -> bool:
    """RFC 3834's Auto-Submitted (anything but "no"), the X-Autoreply / X-Autorespond markers, or a
    Precedence of auto_reply, bulk or junk."""
    auto_submitted = headers.first("Auto-Submitted")
    if auto_submitted is not None and auto_submitted.split(";")[0].strip().lower() != "no":
        return True
    if "X-Autoreply" in headers or "X-Autorespond" in headers:
        return True
    precedence = headers.first("Precedence")
    return precedence is not None and precedence.lower() in _AUTO_PRECEDENCE


def _occurred_at(headers: _Headers, now: datetime | None) -> datetime:
    try:
        moment = parsedate_to_datetime(headers.first("Date") or "")
    except (ValueError, TypeError, IndexError, OverflowError):
        return now or datetime.now(UTC)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


class _HtmlText(HTMLParser):
    """The visible text of an HTML part, for a reply sent without a text/plain one."""

    _BLOCKS = {"p", "div", "br", "tr", "li", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6"}
    _HIDDEN = {"style", "script", "head", "title"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0
        self.quoted = 0

    def handle_starttag(self, tag, attrs):
        if tag in self._HIDDEN:
            self.hidden += 1
        elif tag == "blockquote":  # the quoted history, in HTML mail clients
            self.quoted += 1
        if tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in self._HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag == "blockquote":
            self.quoted = max(0, self.quoted - 1)
        if tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data):
        if not self.hidden and not self.quoted:
            self.parts.append(data)


def _body_text(message: EmailMessage) -> str:
    try:
        part = message.get_body(preferencelist=("plain", "html"))
    except Exception:  # the stdlib's header parser fails on some malformed Content-Type values
        return ""
    if part is None:
        return ""
    try:
        content = part.get_content()
    except Exception:  # an unknown charset, a broken transfer encoding
        payload = part.get_payload(decode=True) or b""
        content = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return ""
    if part.get_content_subtype() == "html":
        parser = _HtmlText()
        parser.feed(content)
        parser.close()
        content = re.sub(r"\n{3,}", "\n\n", "".join(parser.parts))
    return content


def _new_text(text: str) -> str:
    """The reply's own text: mail-parser-reply cuts at the first "On … wrote:" / "From: …" / "-----Original
    Message-----" header; quoted lines (">") left after that, as in a bare quote or an inline reply, go too."""
    latest = EmailReplyParser(languages=_QUOTE_LANGUAGES).parse_reply(text) or ""
    kept = [line for line in latest.splitlines() if not line.lstrip().startswith(">")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip()


def parse_reply(raw: bytes, *, domain: str, now: datetime | None = None) -> InboundReply | None:
    """The reply in a raw RFC 5322 message, or None when it is no reply: not a message at all, or a delivery
    or read report (multipart/report), which a bounce webhook reports instead.

    `domain` is the one in the Message-IDs the service suggests (`<eml_…@DOMAIN>`); `now` is the time given
    a message without a readable Date (default: the clock).
    """
    message = email.message_from_bytes(raw, policy=email.policy.default)
    headers = _Headers(raw, message)
    if not any(name in headers for name in ("From", "To", "Message-ID", "In-Reply-To")):
        return None
    if headers.fallback.get_content_type() == "multipart/report":
        return None
    ref = (_ref_from_ids(headers.first("In-Reply-To"), domain)
           or _ref_from_ids(" ".join(headers.all("References")), domain)
           or _ref_from_addresses(headers))
    sender = next((address for _, address in getaddresses(headers.all("From")) if "@" in address), None)
    return InboundReply(
        ref=ref, message_id=headers.first("Message-ID") or None, auto=_is_auto(headers), sender=sender,
        occurred_at=_occurred_at(headers, now), text=_new_text(_body_text(message)),
    )


def parse_sendgrid_inbound(form: Mapping[str, str | bytes]) -> bytes:
    """The raw message from SendGrid Inbound Parse's form, posted with "POST the raw, full MIME message"
    on: its `email` field. Raises ValueError when the form has none (that setting is off)."""
    raw = form.get("email")
    if isinstance(raw, bytes) and raw.strip():
        return raw
    if isinstance(raw, str) and raw.strip():
        return raw.encode("utf-8", errors="surrogateescape")
    raise ValueError("the SendGrid Inbound Parse form has no 'email' field: turn on "
                     "\"POST the raw, full MIME message\" for this host")
