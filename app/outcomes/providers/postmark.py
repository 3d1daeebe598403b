"""Postmark: webhooks without a signature, behind HTTP basic credentials that the service makes for the source (its
id and a random password, shown once), and the inbound webhook's JSON."""

import base64
import binascii
import hmac
import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from app.outcomes.inbound import HTML_CHARS_PER_TEXT_CHAR, InboundReply, Limits, PairHeaders, html_text, reply_of
from app.outcomes.providers.base import REF_KEY, BadSignature, event, field, iso, json_object, ref_of
from app.outcomes.schemas import BasicAuth, OutcomeEvent, OutcomeType


def check_basic_auth(authorization_header: str | None, username: str, password: str) -> None:
    """Raises BadSignature unless the header carries exactly these HTTP basic credentials.

    Both parts are compared in constant time, and both always are.
    """
    if not authorization_header or not authorization_header.strip():
        raise BadSignature("missing header Authorization (HTTP basic credentials)")
    scheme, _, encoded = authorization_header.strip().partition(" ")
    if scheme.lower() != "basic":
        raise BadSignature("the Authorization header is not HTTP basic")
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except binascii.Error:
        raise BadSignature("the basic credentials are not base64") from None
    given_user, separator, given_password = decoded.partition(b":")
    user_ok = hmac.compare_digest(given_user, username.encode())
    password_ok = hmac.compare_digest(given_password, password.encode())
    if not (separator and user_ok and password_ok):
        raise BadSignature("bad credentials")


# RecordType: (outcome, recipient key, time key)
_POSTMARK_TYPES = {
    "Delivery": (OutcomeType.DELIVERED, "Recipient", "DeliveredAt"),
    "Open": (OutcomeType.OPENED, "Recipient", "ReceivedAt"),
    "Click": (OutcomeType.CLICKED, "Recipient", "ReceivedAt"),
    "Bounce": (OutcomeType.BOUNCED, "Email", "BouncedAt"),  # only Type "HardBounce"
    "SpamComplaint": (OutcomeType.COMPLAINED, "Email", "BouncedAt"),
    "SubscriptionChange": (OutcomeType.UNSUBSCRIBED, "Recipient", "ChangedAt"),  # only SuppressSending
}  # Inbound and any later kind: skipped


def parse_postmark(body: bytes) -> list[OutcomeEvent]:
    """The one record in the body. Postmark gives no event id, so one is derived that is stable across
    retries: `RecordType:MessageID:<its time field>`, plus `:ID` where the record has one (bounces)."""
    record = json_object(body, "Postmark")
    kind = record.get("RecordType")
    if not isinstance(kind, str):
        raise ValueError("the Postmark body has no 'RecordType'")
    if kind not in _POSTMARK_TYPES:
        return []
    outcome, recipient_key, time_key = _POSTMARK_TYPES[kind]
    if kind == "Bounce" and record.get("Type") != "HardBounce":
        return []  # soft bounces, transient failures, auto-responders...
    if kind == "SubscriptionChange" and (
            record.get("SuppressSending") is not True
            or record.get("SuppressionReason") not in (None, "ManualSuppression")):
        return []  # a resubscription; or a suppression for a hard bounce or complaint, reported by its own record
    where = f"Postmark {kind}"
    message_id = field(record, "MessageID", where)
    moment = field(record, time_key, where)
    event_id = f"{kind}:{message_id}:{moment}"
    if record.get("ID") is not None:
        event_id += f":{record['ID']}"
    metadata = record.get("Metadata")
    return [event(
        where, ref=ref_of(metadata.get(REF_KEY)) if isinstance(metadata, dict) else None, type=outcome,
        occurred_at=iso(moment, where), id=event_id, recipient=field(record, recipient_key, where),
    )]


def _json_text(record: Mapping[str, Any], key: str) -> str:
    value = record.get(key)
    return value if isinstance(value, str) else ""


def parse_postmark_inbound(record: Mapping[str, Any], body: bytes, *, domain: str, now: datetime | None = None,
                           limits: Limits = Limits()) -> InboundReply | None:
    """The reply in Postmark's inbound webhook JSON (`record`, decoded from `body`): `Headers` ([{"Name", "Value"}],
    with In-Reply-To, References and Message-ID), `From` / `FromFull`, `To`, `Cc`, `OriginalRecipient`, the
    plus-address part `MailboxHash` (also per address in `ToFull` / `CcFull`), `Date`, and `TextBody` (else
    `HtmlBody`, else `StrippedTextReply`). The event id is the Message-ID header, else Postmark's `MessageID`."""
    listed = record.get("Headers")
    pairs = [(str(item.get("Name", "")), str(item.get("Value", ""))) for item in listed
             if isinstance(item, dict)] if isinstance(listed, list) else []
    given = {name.lower() for name, _ in pairs}
    for name in ("From", "To", "Cc", "Date", "Subject"):
        if name.lower() not in given and _json_text(record, name).strip():
            pairs.append((name, _json_text(record, name)))
    if _json_text(record, "OriginalRecipient").strip():
        pairs.append(("Delivered-To", _json_text(record, "OriginalRecipient")))
    if "message-id" not in given and _json_text(record, "MessageID").strip():
        pairs.append(("Message-ID", "postmark:" + _json_text(record, "MessageID").strip()))
    headers = PairHeaders(pairs)
    hashes = [_json_text(record, "MailboxHash")]
    for key in ("ToFull", "CcFull", "BccFull"):
        if isinstance(record.get(key), list):
            hashes += [_json_text(entry, "MailboxHash") for entry in record[key] if isinstance(entry, dict)]
    sender_full = record.get("FromFull")
    sender = _json_text(sender_full, "Email").strip() if isinstance(sender_full, dict) else ""
    html = _json_text(record, "HtmlBody")[:limits.max_text_chars * HTML_CHARS_PER_TEXT_CHAR]
    text = _json_text(record, "TextBody") or html_text(html) or _json_text(record, "StrippedTextReply")
    return reply_of(headers, text, domain=domain, now=now, limits=limits, fallback_id=body, extra_refs=hashes,
                    sender=sender or None)


class PostmarkInbound:
    """The inbound webhook's JSON object."""

    media: Literal["json"] = "json"
    mark = "Postmark inbound's 'MessageID', 'FromFull' or 'Headers'"

    def claims(self, posted: Mapping[str, Any]) -> bool:
        return any(key in posted for key in ("MessageID", "FromFull", "Headers"))

    def read(self, posted: Mapping[str, Any], body: bytes, *, domain: str, now: datetime | None,
             limits: Limits) -> InboundReply | None:
        return parse_postmark_inbound(posted, body, domain=domain, now=now, limits=limits)


class Postmark:
    title = "Postmark"
    credential = None  # Postmark signs nothing: the service makes basic credentials for the webhook URL
    inbound = PostmarkInbound()

    def credentials(self, source_id: str, given: str) -> tuple[str, BasicAuth | None]:
        basic_auth = BasicAuth(username=source_id, password=secrets.token_urlsafe(24))
        return basic_auth.password, basic_auth

    def verify(self, headers: Mapping[str, str], body: bytes, *, material: str, source_id: str, now: float) -> str | None:
        check_basic_auth(headers.get("authorization"), source_id, material)
        return None

    def parse(self, headers: Mapping[str, str], body: bytes) -> list[OutcomeEvent]:
        return parse_postmark(body)

    def verify_inbound(self, headers: Mapping[str, str], *, material: str, source_id: str) -> None:
        check_basic_auth(headers.get("authorization"), source_id, material)


PROVIDER = Postmark()
