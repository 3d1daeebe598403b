"""Mailgun: HTTP webhooks signed by HMAC-SHA256 of `timestamp + token` with the webhook signing key, inside the JSON
body (the token is returned, so that the caller refuses one it has seen before), and a route's forward of an inbound
reply (its raw MIME, or its parsed fields)."""

import hashlib
import hmac
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from app.outcomes.inbound import InboundReply, Limits, PairHeaders, Refused, parse_reply, reply_of, sender_of
from app.outcomes.providers.base import (
    REF_KEY,
    TOLERANCE_S,
    BadSignature,
    check_timestamp,
    epoch,
    event,
    field,
    json_body,
    ref_of,
)
from app.outcomes.schemas import BasicAuth, OutcomeEvent, OutcomeType

MAILGUN_FIELD_MAX = 200  # a signature block's timestamp, token or signature; the token is kept as a nonce


def verify_mailgun(body: bytes, *, signing_key: str, now: float, tolerance_s: float = TOLERANCE_S) -> str:
    """Checks the body's `signature` block and returns its token: the caller refuses a token seen before.

    Mailgun signs `timestamp + token`, not the event: the token's single use is what binds a request.
    """
    try:
        block = json_body(body, "Mailgun").get("signature")
    except (ValueError, AttributeError):
        raise BadSignature("the Mailgun body is not a JSON object with a signature block") from None
    if not isinstance(block, dict):
        raise BadSignature("the Mailgun body has no signature block")
    fields = {}
    for name in ("timestamp", "token", "signature"):
        value = block.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value:
            raise BadSignature(f"missing signature.{name}")
        if len(value) > MAILGUN_FIELD_MAX or "\x00" in value:  # Mailgun's tokens are 50 hex characters
            raise BadSignature(f"signature.{name} is not Mailgun's: over {MAILGUN_FIELD_MAX} characters or with a NUL")
        fields[name] = value
    expected = hmac.new(signing_key.encode(), (fields["timestamp"] + fields["token"]).encode(), hashlib.sha256)
    if not hmac.compare_digest(expected.hexdigest().encode(), fields["signature"].strip().lower().encode()):
        raise BadSignature("the Mailgun signature does not match")
    check_timestamp(fields["timestamp"], now=now, tolerance_s=tolerance_s, what="signature.timestamp")
    return fields["token"]


_MAILGUN_TYPES = {
    "delivered": OutcomeType.DELIVERED,
    "opened": OutcomeType.OPENED,
    "clicked": OutcomeType.CLICKED,
    "failed": OutcomeType.BOUNCED,  # only with severity "permanent"
    "complained": OutcomeType.COMPLAINED,
    "unsubscribed": OutcomeType.UNSUBSCRIBED,
}  # accepted, rejected, stored and any later kind: skipped


def parse_mailgun(body: bytes) -> list[OutcomeEvent]:
    """The one event in the body's `event-data` (none when its kind is skipped)."""
    payload = json_body(body, "Mailgun")
    data = payload.get("event-data") if isinstance(payload, dict) else None
    if not isinstance(data, dict):
        raise ValueError("the Mailgun body has no 'event-data' object")
    where = "Mailgun event-data"
    kind = data.get("event")
    if not isinstance(kind, str):
        raise ValueError(f"{where}: missing 'event'")
    outcome = _MAILGUN_TYPES.get(kind)
    if outcome is None or (kind == "failed" and data.get("severity") != "permanent"):
        return []  # a temporary failure is retried by Mailgun: not a bounce
    variables = data.get("user-variables")
    client = data.get("client-info")
    bot = client.get("bot") if isinstance(client, dict) else None  # "apple", "gmail", "generic" or ""
    return [event(
        where, ref=ref_of(variables.get(REF_KEY)) if isinstance(variables, dict) else None, type=outcome,
        occurred_at=epoch(data.get("timestamp"), where), id=field(data, "id", where),
        recipient=field(data, "recipient", where),
        machine=outcome in (OutcomeType.OPENED, OutcomeType.CLICKED) and isinstance(bot, str) and bool(bot.strip()),
    )]


def _text_field(fields: Mapping[str, bytes], name: str) -> str:
    return fields.get(name, b"").decode("utf-8", "replace")


def parse_mailgun_inbound(fields: Mapping[str, bytes], *, domain: str, now: datetime | None = None,
                          limits: Limits = Limits()) -> InboundReply | None:
    """The reply in Mailgun's route forward: its `body-mime` (a route to a URL ending in "mime") is the raw message;
    otherwise its parsed fields: `message-headers` (a JSON list of [name, value]), the `In-Reply-To`, `References`,
    `Message-Id`, `Date` and `To` fields where they come on their own, `from` / `sender`, `recipient` (the envelope
    address, which may be a plus-address) and `body-plain` (else `stripped-text`)."""
    if fields.get("body-mime", b"").strip():
        return parse_reply(fields["body-mime"], domain=domain, now=now, limits=limits)
    try:
        listed = json.loads(fields.get("message-headers") or b"[]")
    except (ValueError, RecursionError):
        raise Refused("Mailgun's message-headers is not a JSON list of [name, value] pairs") from None
    pairs = [(str(item[0]), str(item[1])) for item in listed if isinstance(item, list) and len(item) == 2] \
        if isinstance(listed, list) else []
    given = {name.lower() for name, _ in pairs}
    for name in ("In-Reply-To", "References", "Message-Id", "Date", "To", "From"):
        if name.lower() not in given and _text_field(fields, name).strip():
            pairs.append((name, _text_field(fields, name)))
    if "from" not in given and "From" not in fields and _text_field(fields, "from").strip():
        pairs.append(("From", _text_field(fields, "from")))
    if _text_field(fields, "recipient").strip():
        pairs.append(("Delivered-To", _text_field(fields, "recipient")))
    headers = PairHeaders(pairs)
    if not headers.pairs or headers.content_type() == "multipart/report":
        return None
    text = _text_field(fields, "body-plain") or _text_field(fields, "stripped-text")
    sender = sender_of(headers) or (_text_field(fields, "sender").strip() or None)
    return reply_of(headers, text, domain=domain, now=now, limits=limits, fallback_id=json.dumps(sorted(
        (k, v.decode("latin-1")) for k, v in fields.items() if k not in ("signature", "timestamp", "token"))).encode(),
        sender=sender)


class MailgunInbound:
    """A route's forward() to a URL: raw MIME (`body-mime`) or parsed fields."""

    media: Literal["form"] = "form"
    mark = "Mailgun's 'body-mime' or 'message-headers'"

    def claims(self, posted: Mapping[str, Any]) -> bool:
        return any(name in posted for name in ("body-mime", "message-headers", "body-plain"))

    def read(self, posted: Mapping[str, Any], body: bytes, *, domain: str, now: datetime | None,
             limits: Limits) -> InboundReply | None:
        return parse_mailgun_inbound(posted, domain=domain, now=now, limits=limits)


class Mailgun:
    title = "Mailgun"
    credential = "signing_key"
    inbound = MailgunInbound()

    def credentials(self, source_id: str, given: str) -> tuple[str, BasicAuth | None]:
        return given, None

    def verify(self, headers: Mapping[str, str], body: bytes, *, material: str, source_id: str, now: float) -> str | None:
        return verify_mailgun(body, signing_key=material, now=now)

    def parse(self, headers: Mapping[str, str], body: bytes) -> list[OutcomeEvent]:
        return parse_mailgun(body)

    def verify_inbound(self, headers: Mapping[str, str], *, material: str, source_id: str) -> None:
        """The signature of a route's forward is not checked: the unguessable inbound URL is the credential."""


PROVIDER = Mailgun()
