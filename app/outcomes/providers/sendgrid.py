"""SendGrid: the signed Event Webhook (ECDSA P-256 / SHA-256 over `timestamp + body`, verified with the base64 DER
public key SendGrid shows, by `cryptography`), and Inbound Parse's form with the raw message."""

import base64
import binascii
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from app.outcomes.inbound import InboundReply, Limits, parse_reply
from app.outcomes.providers.base import (
    REF_KEY,
    TOLERANCE_S,
    BadSignature,
    check_timestamp,
    epoch,
    event,
    field,
    json_body,
    lowered,
    ref_of,
    required_header,
)
from app.outcomes.schemas import BasicAuth, OutcomeEvent, OutcomeType

SENDGRID_SIGNATURE = "X-Twilio-Email-Event-Webhook-Signature"
SENDGRID_TIMESTAMP = "X-Twilio-Email-Event-Webhook-Timestamp"


def load_sendgrid_key(public_key: str) -> ec.EllipticCurvePublicKey:
    """The verification key as SendGrid shows it (base64 DER SubjectPublicKeyInfo, P-256).

    Raises ValueError when it is not one: a configuration error, checked best when the key is saved.
    """
    try:
        key = serialization.load_der_public_key(base64.b64decode(public_key.strip(), validate=True))
    except (binascii.Error, ValueError, UnsupportedAlgorithm):
        raise ValueError("the SendGrid verification key is not a base64 DER public key") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ValueError("the SendGrid verification key is not an ECDSA P-256 public key")
    return key


def verify_sendgrid(headers: Mapping[str, str], body: bytes, *, public_key: str | ec.EllipticCurvePublicKey,
                    now: float, tolerance_s: float = TOLERANCE_S) -> None:
    """Raises BadSignature unless `body` is signed by the key SendGrid shows, with a recent timestamp.

    A malformed `public_key` raises ValueError (see `load_sendgrid_key`).
    """
    key = load_sendgrid_key(public_key) if isinstance(public_key, str) else public_key
    named = lowered(headers)
    signature = required_header(named, SENDGRID_SIGNATURE)
    timestamp = required_header(named, SENDGRID_TIMESTAMP)
    try:
        der = base64.b64decode(signature, validate=True)
    except binascii.Error:
        raise BadSignature(f"{SENDGRID_SIGNATURE} is not base64") from None
    try:
        key.verify(der, timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise BadSignature("the SendGrid signature does not match the body and timestamp") from None
    check_timestamp(timestamp, now=now, tolerance_s=tolerance_s, what=SENDGRID_TIMESTAMP)


_SENDGRID_TYPES = {
    "delivered": OutcomeType.DELIVERED,
    "open": OutcomeType.OPENED,
    "click": OutcomeType.CLICKED,
    "bounce": OutcomeType.BOUNCED,
    "dropped": OutcomeType.BOUNCED,  # never sent: a suppressed or invalid address
    "spamreport": OutcomeType.COMPLAINED,
    "unsubscribe": OutcomeType.UNSUBSCRIBED,
    "group_unsubscribe": OutcomeType.UNSUBSCRIBED,
}  # processed, deferred, group_resubscribe and any later kind: skipped


def _sendgrid_ref(record: Mapping[str, Any]) -> str | None:
    # custom_args arrive as top-level keys; legacy SMTP API senders may nest them under unique_args
    ref = ref_of(record.get(REF_KEY))
    for nested in ("unique_args", "custom_args"):
        if ref is None and isinstance(record.get(nested), dict):
            ref = ref_of(record[nested].get(REF_KEY))
    return ref


def parse_sendgrid(body: bytes) -> list[OutcomeEvent]:
    """The Event Webhook's JSON array of events, in order, less the kinds that are skipped."""
    records = json_body(body, "SendGrid")
    if not isinstance(records, list):
        raise ValueError("the SendGrid body is not a JSON array of events")
    events = []
    for index, record in enumerate(records):
        where = f"SendGrid event {index}"
        if not isinstance(record, dict):
            raise ValueError(f"{where} is not a JSON object")
        kind = record.get("event")
        if not isinstance(kind, str):
            raise ValueError(f"{where}: missing 'event'")
        outcome = _SENDGRID_TYPES.get(kind)
        if outcome is None:
            continue
        if kind == "bounce" and str(record.get("type", "bounce")).lower() == "blocked":
            continue  # "blocked": the receiving server refused it for now, not a permanent bounce
        events.append(event(
            where, ref=_sendgrid_ref(record), type=outcome, occurred_at=epoch(record.get("timestamp"), where),
            id=field(record, "sg_event_id", where), recipient=field(record, "email", where),
            machine=outcome == OutcomeType.OPENED and record.get("sg_machine_open") is True,
        ))
    return events


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


class SendGridInbound:
    """Inbound Parse's form, whose `email` field is the raw message."""

    media: Literal["form"] = "form"
    mark = "SendGrid Inbound Parse's 'email' field (turn on \"POST the raw, full MIME message\" for this host)"

    def claims(self, posted: Mapping[str, Any]) -> bool:
        return bool(posted.get("email", b"").strip())

    def read(self, posted: Mapping[str, Any], body: bytes, *, domain: str, now: datetime | None,
             limits: Limits) -> InboundReply | None:
        return parse_reply(parse_sendgrid_inbound(posted), domain=domain, now=now, limits=limits)


class SendGrid:
    title = "SendGrid"
    credential = "verification_key"
    inbound = SendGridInbound()

    def credentials(self, source_id: str, given: str) -> tuple[str, BasicAuth | None]:
        load_sendgrid_key(given)  # a key that is no P-256 public key is refused when it is saved
        return given, None

    def verify(self, headers: Mapping[str, str], body: bytes, *, material: str, source_id: str, now: float) -> str | None:
        verify_sendgrid(headers, body, public_key=material, now=now)
        return None

    def parse(self, headers: Mapping[str, str], body: bytes) -> list[OutcomeEvent]:
        return parse_sendgrid(body)

    def verify_inbound(self, headers: Mapping[str, str], *, material: str, source_id: str) -> None:
        """SendGrid signs no inbound mail: the unguessable inbound URL is the credential."""


PROVIDER = SendGrid()
