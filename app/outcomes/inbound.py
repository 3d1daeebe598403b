"""Replies to the emails the service wrote: the parts every inbound shape shares. A raw RFC 822 message is read
here; a provider's own shape (SendGrid Inbound Parse's form, Mailgun's route forward, Postmark's inbound JSON) is
read by its module in `app.outcomes.providers`, with the header, text and attribution rules below.

A reply is attributed to its email by the ref (`eml_…`) in the Message-ID the email was sent with,
`<eml_…@DOMAIN>`, which the reply quotes in `In-Reply-To` / `References`; failing that, by a plus-address
(`anything+eml_…@…`) the reply was sent to. Auto-replies (out of office, vacation, list robots) are
flagged so that they are recorded but never counted as replies.

The stdlib `email` package parses the message; `app.outcomes.replies` cuts the quoted history, mobile signatures and
list footers from its text (measured over public reply corpora: bench/replies.py) and classifies it.

Everything here reads input any sender of an email controls, and is CPU-bound: `app.outcomes.inbound_pool`
runs it in worker processes under a time budget, never on the API's event loop. The work itself is bounded
too (`Limits`): MIME parts and their nesting are counted while the message is parsed, and the reply cutter
reads a bounded text in one pass, never taking a line longer than MAX_HEADER_LINE_CHARS for a header.
"""
import email
import email.parser
import email.policy
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.feedparser import BytesFeedParser
from email.message import EmailMessage, Message
from email.utils import getaddresses, parsedate_to_datetime
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import Field, File, create_form_parser, parse_options_header

from app.outcomes.replies.cutter import cut_text
from app.outcomes.replies.html import html_text

# the ref: "eml_" and 20 lower-case base32 characters (digits allowed, whichever base32 alphabet made it)
_REF = r"eml_[a-z0-9]{20}"
_MESSAGE_ID = re.compile(rf"<({_REF})@([^<>\s@]+)>", re.IGNORECASE)
_PLUS_ADDRESS = re.compile(rf"\+({_REF})@", re.IGNORECASE)
_BARE_REF = re.compile(rf"{_REF}", re.IGNORECASE)
_AUTO_PRECEDENCE = {"auto_reply", "bulk", "junk"}

MAX_KEY_CHARS = 500  # an event id or recipient key (OutcomeEvent's fields); longer ones are kept as a digest
# Of an HTML body, the first max_text_chars times this many characters are read: html.parser is quadratic on some
# markup ("</" repeated with no ">": 2 MB took 268 s; 128 KB about 1 s), and a reply's own text comes first.
HTML_CHARS_PER_TEXT_CHAR = 4
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # NUL (PostgreSQL text refuses it) and lone surrogates (not UTF-8)


@dataclass(frozen=True)
class Limits:
    """How much of one inbound message is read (settings INBOUND_MAX_TEXT_CHARS, INBOUND_MAX_MIME_PARTS,
    INBOUND_MAX_MIME_DEPTH); beyond the first two the message is refused, beyond the text the rest is cut."""

    max_text_chars: int = 32_768
    max_mime_parts: int = 500
    max_mime_depth: int = 20


class Refused(ValueError):
    """The message cannot be read within its limits, or is not what the route takes; the message says which and is
    safe to show the sender."""


class InboundReply(BaseModel):
    model_config = ConfigDict(frozen=True)

    ref: str | None  # the email replied to; None when the reply names none of ours
    message_id: str | None  # the reply's own Message-ID, as in its header
    event_id: str  # what counts it once: its Message-ID (a digest when long or unstorable), else a digest of it all
    auto: bool  # an auto-reply: recorded, never counted as a reply
    sender: str | None  # the From address
    occurred_at: datetime  # the reply's Date (UTC when it names no zone), else when it was parsed
    text: str  # the new text, quoted history and "On … wrote:" blocks removed, at most Limits.max_text_chars


def storable_key(value: str) -> str:
    """`value` as an event id or recipient key: itself when it is short, printable and not digest-like; else
    "sha256:" and the hex SHA-256 of it, so that two long ids sharing a prefix stay two (and NUL or a lone
    surrogate, which no database text column takes, never reaches one)."""
    if 0 < len(value) <= MAX_KEY_CHARS and value.isprintable() and not value.startswith("sha256:"):
        return value
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _storable(text: str) -> str:
    """Text a database column takes: no NUL, lone surrogates as U+FFFD."""
    return _UNSTORABLE.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", text)


# ---------------------------------------------------------------- headers


_HEADERS_END = re.compile(rb"\r?\n\r?\n")


class _Headers:
    """A message's header values as their text, unfolded (RFC 2047 words left encoded: no field read here needs them
    decoded). Read with compat32, not policy.default, whose structured parser is quadratic on some values (40,000
    commas in a To took 8.5 s) and recursive on others (nested comments raised RecursionError); 8-bit headers are
    read as UTF-8, else Latin-1, so that two ids differing only in their bytes stay two."""

    def __init__(self, raw: bytes):
        end = _HEADERS_END.search(raw)
        head = raw[:end.end()] if end else raw
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            text = head.decode("latin-1")
        self.message: Message = email.parser.Parser(policy=email.policy.compat32).parsestr(text, headersonly=True)

    def __contains__(self, name: str) -> bool:
        return name in self.message

    def all(self, name: str) -> list[str]:
        return ["".join(str(value).splitlines()) for value in self.message.get_all(name, [])]

    def first(self, name: str) -> str | None:
        values = self.all(name)
        return values[0].strip() if values else None

    def content_type(self) -> str:
        return self.message.get_content_type()


class PairHeaders:
    """Headers a provider already parsed, as (name, value) pairs (Postmark's `Headers`, Mailgun's `message-headers`)."""

    def __init__(self, pairs: Iterable[tuple[str, str]]):
        self.pairs = [(name.strip().lower(), value) for name, value in pairs]

    def __contains__(self, name: str) -> bool:
        return any(key == name.lower() for key, _ in self.pairs)

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.pairs if key == name.lower()]

    def first(self, name: str) -> str | None:
        values = self.all(name)
        return values[0].strip() if values else None

    def content_type(self) -> str:
        return (self.first("Content-Type") or "text/plain").split(";")[0].strip().lower()


def _ref_from_ids(value: str | None, domain: str) -> str | None:
    for ref, id_domain in _MESSAGE_ID.findall(value or ""):
        if id_domain.lower() == domain.lower():
            return ref.lower()
    return None


def _ref_from_addresses(headers) -> str | None:
    """A plus-address's ref, searched in the header text (linear, where an address parser need not be)."""
    for name in ("To", "Cc", "Delivered-To"):
        for value in headers.all(name):
            match = _PLUS_ADDRESS.search(value)
            if match:
                return match.group(1).lower()
    return None


def _is_auto(headers) -> bool:
    """RFC 3834's Auto-Submitted (anything but "no"), the X-Autoreply / X-Autorespond markers, or a
    Precedence of auto_reply, bulk or junk."""
    auto_submitted = headers.first("Auto-Submitted")
    if auto_submitted is not None and auto_submitted.split(";")[0].strip().lower() != "no":
        return True
    if "X-Autoreply" in headers or "X-Autorespond" in headers:
        return True
    precedence = headers.first("Precedence")
    return precedence is not None and precedence.lower() in _AUTO_PRECEDENCE


_COLON_ZONE = re.compile(r"([+-]\d\d):(\d\d)\s*$")  # "-04:00", as some servers (and Postmark's JSON) write the zone


def _occurred_at(value: str | None, now: datetime | None) -> datetime:
    """The Date in UTC; a missing or unreadable one, or one that leaves the calendar once in UTC (year 9999 at
    -14:00), is `now`: the reply still counts, dated when it came."""
    try:
        moment = parsedate_to_datetime(_COLON_ZONE.sub(r"\1\2", value or ""))
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    except (ValueError, TypeError, IndexError, OverflowError):
        return now or datetime.now(UTC)


MAX_FROM_CHARS = 2000  # of a From value, what the address parser reads (it recurses on nested comments)


def sender_of(headers) -> str | None:
    try:
        addresses = getaddresses([value[:MAX_FROM_CHARS] for value in headers.all("From")])
    except RecursionError:
        return None
    return next((address for _, address in addresses if "@" in address), None)


# ---------------------------------------------------------------- text


def _body_text(message: EmailMessage, limits: Limits) -> str:
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
        return html_text(content[:limits.max_text_chars * HTML_CHARS_PER_TEXT_CHAR])
    return content


def new_text(text: str, max_chars: int = Limits.max_text_chars) -> str:
    """The reply's own text (`app.outcomes.replies.cutter`), of the first `max_chars` characters, storable."""
    return _storable(cut_text(text, max_chars))


# ---------------------------------------------------------------- raw RFC 822


def _parse_message(raw: bytes, limits: Limits) -> EmailMessage:
    """The message, parsed by policy.default; Refused past Limits.max_mime_parts parts (counted as the parser makes
    them, so a message of 100,000 tiny parts costs no more than one of max_mime_parts) or Limits.max_mime_depth
    levels of nesting (the parser recurses once per level: 1,000 levels raised RecursionError)."""
    made = 0

    def counted(policy=email.policy.default) -> EmailMessage:
        nonlocal made
        made += 1
        if made > limits.max_mime_parts:
            raise Refused(f"the message has more than {limits.max_mime_parts} MIME parts (INBOUND_MAX_MIME_PARTS)")
        return EmailMessage(policy=policy)

    parser = BytesFeedParser(_factory=counted, policy=email.policy.default)
    made = 0  # the feed parser calls its factory once to try it
    try:
        parser.feed(raw)
        message = parser.close()
    except RecursionError:  # MIME parts hundreds of levels deep, or a header's comments (the parser recurses on both)
        raise Refused(f"the message is nested too deeply to read (MIME parts deeper than {limits.max_mime_depth} "
                      "levels, INBOUND_MAX_MIME_DEPTH, or comments in a header)") from None
    deepest, stack = 0, [(message, 1)]
    while stack:  # iterative: walk() and get_body() recurse, and run only once the depth is known to be small
        part, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limits.max_mime_depth:
            raise Refused(f"the message's MIME parts are nested deeper than {limits.max_mime_depth} levels "
                          "(INBOUND_MAX_MIME_DEPTH)")
        payload = part.get_payload()
        if isinstance(payload, list):
            stack.extend((child, depth + 1) for child in payload if isinstance(child, Message))
    return message


def reply_of(headers, text: str, *, domain: str, now: datetime | None, limits: Limits, fallback_id: bytes,
             extra_refs: Iterable[str | None] = (), sender: str | None = None) -> InboundReply:
    """The reply in a message's headers (`_Headers`, or a provider's `PairHeaders`) and text; `fallback_id` is
    digested into its event id when it has no Message-ID."""
    ref = (_ref_from_ids(headers.first("In-Reply-To"), domain)
           or _ref_from_ids(" ".join(headers.all("References")), domain)
           or _ref_from_addresses(headers))
    for candidate in extra_refs:  # a provider's own reading of the plus-address (Postmark's MailboxHash)
        if ref is None and candidate and _BARE_REF.fullmatch(candidate.strip()):
            ref = candidate.strip().lower()
    message_id = headers.first("Message-ID") or None
    return InboundReply(
        ref=ref, message_id=message_id and _storable(message_id),
        event_id=storable_key(message_id) if message_id else "sha256:" + hashlib.sha256(fallback_id).hexdigest(),
        auto=_is_auto(headers), sender=sender or sender_of(headers),
        occurred_at=_occurred_at(headers.first("Date"), now), text=new_text(text, limits.max_text_chars),
    )


def parse_reply(raw: bytes, *, domain: str, now: datetime | None = None, limits: Limits = Limits()) -> InboundReply | None:
    """The reply in a raw RFC 5322 message, or None when it is no reply: not a message at all, or a delivery
    or read report (multipart/report), which a bounce webhook reports instead. Refused beyond `limits`.

    `domain` is the one in the Message-IDs the service suggests (`<eml_…@DOMAIN>`); `now` is the time given
    a message without a readable Date (default: the clock).
    """
    message = _parse_message(raw, limits)
    headers = _Headers(raw)
    if not any(name in headers for name in ("From", "To", "Message-ID", "In-Reply-To")):
        return None
    if headers.content_type() == "multipart/report":
        return None
    return reply_of(headers, _body_text(message, limits), domain=domain, now=now, limits=limits, fallback_id=raw)


# ---------------------------------------------------------------- forms


def form_fields(content_type: str, body: bytes, limits: Limits = Limits()) -> dict[str, bytes]:
    """The text fields of a multipart/form-data or urlencoded body (the first of each name); files are skipped.
    Refused past Limits.max_mime_parts fields and files, or when the body is no such form."""
    fields: dict[str, bytes] = {}
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        try:
            pairs = parse_qsl(body.decode("latin-1"), keep_blank_values=True, max_num_fields=limits.max_mime_parts,
                              encoding="latin-1")
        except ValueError:
            raise Refused(f"the form has more than {limits.max_mime_parts} fields (INBOUND_MAX_MIME_PARTS)") from None
        for name, value in pairs:
            fields.setdefault(name.encode("latin-1").decode("utf-8", "replace"), value.encode("latin-1"))
        return fields
    if not parse_options_header(content_type)[1].get(b"boundary"):
        raise Refused("the body is no readable form: multipart/form-data without a boundary")
    parts = 0

    def on_part(part: Field | File) -> None:
        nonlocal parts
        parts += 1
        if parts > limits.max_mime_parts:
            raise Refused(f"the form has more than {limits.max_mime_parts} fields and files (INBOUND_MAX_MIME_PARTS)")
        if isinstance(part, Field) and part.field_name is not None:
            fields.setdefault(part.field_name.decode("utf-8", "replace"), part.value or b"")

    try:
        parser = create_form_parser({"Content-Type": content_type.encode("latin-1", "replace")}, on_part, on_part,
                                    config={"MAX_MEMORY_FILE_SIZE": float("inf")})  # files stay in memory (bounded body)
        parser.write(body)
        parser.finalize()
    except (FormParserError, ValueError) as exc:
        if isinstance(exc, Refused):
            raise
        raise Refused(f"the body is no readable form: {str(exc)[:200]}") from None
    return fields
