"""Email providers' webhook requests, verified and turned into `OutcomeEvent`s.

Pure functions: no database, no HTTP framework. For each provider a `verify_*` function authenticates
the request exactly as the provider signs it and raises `BadSignature` (its message is safe to show the
caller), and a `parse_*` function maps the body to events, raising `ValueError` on a malformed body.
Events of a kind that says nothing about how the email landed (processed, deferred, a temporary
failure...) are skipped, so a request may yield no event at all.

Every email carries its ref (`eml_…`) under the custom key `codreamer_ref`; an event without one gets
`ref=None` (counted as unattributed).

- SendGrid, signed Event Webhook: ECDSA P-256 / SHA-256 over `timestamp + body`, verified with the
  base64 DER public key SendGrid shows (`cryptography`).
- Mailgun: HMAC-SHA256 of `timestamp + token` with the webhook signing key, inside the JSON body. The
  token is returned so that the caller can refuse one it has seen before.
- Resend: Svix signing (`svix-id`, `svix-timestamp`, `svix-signature`), verified by `standardwebhooks`.
- Postmark: no signature; HTTP basic credentials that the service generated (`check_basic_auth`).
"""

import base64
import binascii
import hashlib
import hmac
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parseaddr
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from pydantic import ValidationError
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app.outcomes.schemas import OutcomeEvent, OutcomeType

TOLERANCE_S = 300  # a signed timestamp must be within 5 minutes of `now`, either way
MAILGUN_FIELD_MAX = 200  # a signature block's timestamp, token or signature; the token is kept as a nonce
REF_KEY = "codreamer_ref"

SENDGRID_SIGNATURE = "X-Twilio-Email-Event-Webhook-Signature"
SENDGRID_TIMESTAMP = "X-Twilio-Email-Event-Webhook-Timestamp"
# Resend sends Svix's header names; standardwebhooks reads the webhook-* ones (Svix's white-label names)
_SVIX_HEADERS = {"svix-id": "webhook-id", "svix-timestamp": "webhook-timestamp", "svix-signature": "webhook-signature"}


class BadSignature(Exception):
    """The request is not authenticated: a header is missing, the signature or credentials do not match,
    or the signed timestamp is outside the tolerance. The message says which, and is safe to show."""


# --- shared helpers ---------------------------------------------------------------------------------------------


def _lowered(headers: Mapping[str, str]) -> dict[str, str]:
    """Any mapping (starlette's Headers, a plain dict) as a dict keyed by lower-case names."""
    return {str(name).lower(): value for name, value in headers.items()}


def _required_header(headers: dict[str, str], name: str) -> str:
    value = headers.get(name.lower())
    if not value or not value.strip():
        raise BadSignature(f"missing header {name}")
    return value.strip()


def _check_timestamp(value: str, *, now: float, tolerance_s: float, what: str) -> None:
    try:
        timestamp = int(value.strip())
    except ValueError:
        raise BadSignature(f"{what} is not a Unix time in seconds") from None
    if now - timestamp > tolerance_s:
        raise BadSignature(f"{what} is too old (more than {tolerance_s:g} s before now): a replay is refused")
    if timestamp - now > tolerance_s:
        raise BadSignature(f"{what} is too far in the future (more than {tolerance_s:g} s after now)")


def _json(body: bytes, provider: str) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"the {provider} body is not JSON: {error}") from None
    except RecursionError:  # the decoder's own bound, at about a thousand levels: no provider nests that deep
        raise ValueError(f"the {provider} body is nested too deeply to be the provider's JSON") from None


def _json_object(body: bytes, provider: str) -> dict:
    payload = _json(body, provider)
    if not isinstance(payload, dict):
        raise ValueError(f"the {provider} body is not a JSON object")
    return payload


def _ref(value: Any) -> str | None:
    """The ref as sent, or None when the event carried none (or something that cannot be one)."""
    if isinstance(value, str) and value.strip() and len(value.strip()) <= 500:
        return value.strip()
    return None


def _epoch(value: Any, where: str) -> datetime:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{where}: the timestamp is not a Unix time")
    try:
        seconds = float(value)
        if not math.isfinite(seconds):
            raise ValueError
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (ValueError, OverflowError, OSError):
        raise ValueError(f"{where}: the timestamp {str(value)[:40]!r} is not a Unix time") from None


def _iso(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{where}: the time is not an ISO 8601 string")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{where}: the time {value[:40]!r} is not ISO 8601") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _field(record: Mapping[str, Any], key: str, where: str) -> str:
    value = record.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: missing {key!r}")
    return value.strip()


def _event(where: str, **fields: Any) -> OutcomeEvent:
    try:
        return OutcomeEvent(**fields)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise ValueError(f"{where}: {problems}") from None


# --- SendGrid ---------------------------------------------------------------------------------------------------


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
    lowered = _lowered(headers)
    signature = _required_header(lowered, SENDGRID_SIGNATURE)
    timestamp = _required_header(lowered, SENDGRID_TIMESTAMP)
    try:
        der = base64.b64decode(signature, validate=True)
    except binascii.Error:
        raise BadSignature(f"{SENDGRID_SIGNATURE} is not base64") from None
    try:
        key.verify(der, timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise BadSignature("the SendGrid signature does not match the body and timestamp") from None
    _check_timestamp(timestamp, now=now, tolerance_s=tolerance_s, what=SENDGRID_TIMESTAMP)


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
    ref = _ref(record.get(REF_KEY))
    for nested in ("unique_args", "custom_args"):
        if ref is None and isinstance(record.get(nested), dict):
            ref = _ref(record[nested].get(REF_KEY))
    return ref


def parse_sendgrid(body: bytes) -> list[OutcomeEvent]:
    """The Event Webhook's JSON array of events, in order, less the kinds that are skipped."""
    records = _json(body, "SendGrid")
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
        events.append(_event(
            where, ref=_sendgrid_ref(record), type=outcome, occurred_at=_epoch(record.get("timestamp"), where),
            id=_field(record, "sg_event_id", where), recipient=_field(record, "email", where),
            machine=outcome == OutcomeType.OPENED and record.get("sg_machine_open") is True,
        ))
    return events


# --- Mailgun ----------------------------------------------------------------------------------------------------


def verify_mailgun(body: bytes, *, signing_key: str, now: float, tolerance_s: float = TOLERANCE_S) -> str:
    """Checks the body's `signature` block and returns its token: the caller refuses a token seen before.

    Mailgun signs `timestamp + token`, not the event: the token's single use is what binds a request.
    """
    try:
        block = _json(body, "Mailgun").get("signature")
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
    _check_timestamp(fields["timestamp"], now=now, tolerance_s=tolerance_s, what="signature.timestamp")
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
    payload = _json(body, "Mailgun")
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
    return [_event(
        where, ref=_ref(variables.get(REF_KEY)) if isinstance(variables, dict) else None, type=outcome,
        occurred_at=_epoch(data.get("timestamp"), where), id=_field(data, "id", where),
        recipient=_field(data, "recipient", where),
        machine=outcome in (OutcomeType.OPENED, OutcomeType.CLICKED) and isinstance(bot, str) and bool(bot.strip()),
    )]


# --- Resend -----------------------------------------------------------------------------------------------------


def _svix_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """svix-* (what Resend sends) or webhook-* headers, under the names standardwebhooks reads."""
    lowered = _lowered(headers)
    found = {}
    for svix, standard in _SVIX_HEADERS.items():
        value = lowered.get(svix) or lowered.get(standard)
        if not value or not value.strip():
            raise BadSignature(f"missing header {svix}")
        found[standard] = value.strip()
    return found


def verify_resend(headers: Mapping[str, str], body: bytes, *, secret: str, now: float,
                  tolerance_s: float = TOLERANCE_S) -> None:
    """Raises BadSignature unless the Svix signature matches `body` under `secret` (`whsec_…`).

    The timestamp is checked against `now`; standardwebhooks also checks it against the clock, with the
    same 5 minutes. A malformed `secret` raises ValueError (a configuration error).
    """
    found = _svix_headers(headers)
    _check_timestamp(found["webhook-timestamp"], now=now, tolerance_s=tolerance_s, what="svix-timestamp")
    try:
        webhook = Webhook(secret)
    except Exception:
        raise ValueError("the Resend signing secret is not a whsec_ base64 secret") from None
    try:
        webhook.verify(body, found, json_parse=False)
    except WebhookVerificationError as error:
        raise BadSignature(f"the Resend signature does not verify: {error}") from None
    except ValueError:  # a signature entry without "v1,", bad base64, a body that is not UTF-8
        raise BadSignature("the svix-signature header or the body is malformed") from None


_RESEND_TYPES = {
    "email.delivered": OutcomeType.DELIVERED,
    "email.opened": OutcomeType.OPENED,
    "email.clicked": OutcomeType.CLICKED,
    "email.bounced": OutcomeType.BOUNCED,  # Resend: "permanently rejected"
    "email.complained": OutcomeType.COMPLAINED,
}  # email.sent, email.delivery_delayed, email.received, contact.* and domain.*: skipped


def _resend_ref(tags: Any) -> str | None:
    if isinstance(tags, dict):
        return _ref(tags.get(REF_KEY))
    if isinstance(tags, list):  # the shape the send API takes: [{"name": ..., "value": ...}]
        for tag in tags:
            if isinstance(tag, dict) and tag.get("name") == REF_KEY:
                return _ref(tag.get("value"))
    return None


def _resend_recipient(to: Any, where: str) -> str:
    first = to[0] if isinstance(to, list) and to else to
    if not isinstance(first, str) or not first.strip():
        raise ValueError(f"{where}: missing data.to")
    address = parseaddr(first)[1]  # "Name <a@b>" or a bare address
    return address or first.strip()


def parse_resend(headers: Mapping[str, str], body: bytes) -> list[OutcomeEvent]:
    """The one event in the body; its id is the `svix-id` header (the same on every retry)."""
    payload = _json_object(body, "Resend")
    kind = payload.get("type")
    if not isinstance(kind, str):
        raise ValueError("the Resend body has no 'type'")
    outcome = _RESEND_TYPES.get(kind)
    if outcome is None:
        return []
    where = f"Resend {kind}"
    data = payload.get("data")
    if not isinstance(data, dict):
        raise ValueError(f"{where}: missing 'data'")
    lowered = _lowered(headers)
    event_id = lowered.get("svix-id") or lowered.get("webhook-id")
    if not event_id or not event_id.strip():
        raise ValueError(f"{where}: missing header svix-id (the event's id)")
    return [_event(
        where, ref=_resend_ref(data.get("tags")), type=outcome, id=event_id.strip(),
        occurred_at=_iso(payload.get("created_at", data.get("created_at")), where),
        recipient=_resend_recipient(data.get("to"), where),
    )]


# --- Postmark ---------------------------------------------------------------------------------------------------


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
    record = _json_object(body, "Postmark")
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
    message_id = _field(record, "MessageID", where)
    moment = _field(record, time_key, where)
    event_id = f"{kind}:{message_id}:{moment}"
    if record.get("ID") is not None:
        event_id += f":{record['ID']}"
    metadata = record.get("Metadata")
    return [_event(
        where, ref=_ref(metadata.get(REF_KEY)) if isinstance(metadata, dict) else None, type=outcome,
        occurred_at=_iso(moment, where), id=event_id, recipient=_field(record, recipient_key, where),
    )]
