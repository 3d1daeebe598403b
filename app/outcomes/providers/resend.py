"""Resend: webhooks signed by Svix (`svix-id`, `svix-timestamp`, `svix-signature`), verified by `standardwebhooks`.
Resend posts no inbound replies of its own shape."""

from collections.abc import Mapping
from email.utils import parseaddr
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app.outcomes.providers.base import (
    REF_KEY,
    TOLERANCE_S,
    BadSignature,
    check_timestamp,
    event,
    iso,
    json_object,
    lowered,
    ref_of,
)
from app.outcomes.schemas import BasicAuth, OutcomeEvent, OutcomeType

# Resend sends Svix's header names; standardwebhooks reads the webhook-* ones (Svix's white-label names)
_SVIX_HEADERS = {"svix-id": "webhook-id", "svix-timestamp": "webhook-timestamp", "svix-signature": "webhook-signature"}


def _svix_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """svix-* (what Resend sends) or webhook-* headers, under the names standardwebhooks reads."""
    named = lowered(headers)
    found = {}
    for svix, standard in _SVIX_HEADERS.items():
        value = named.get(svix) or named.get(standard)
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
    check_timestamp(found["webhook-timestamp"], now=now, tolerance_s=tolerance_s, what="svix-timestamp")
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
        return ref_of(tags.get(REF_KEY))
    if isinstance(tags, list):  # the shape the send API takes: [{"name": ..., "value": ...}]
        for tag in tags:
            if isinstance(tag, dict) and tag.get("name") == REF_KEY:
                return ref_of(tag.get("value"))
    return None


def _resend_recipient(to: Any, where: str) -> str:
    first = to[0] if isinstance(to, list) and to else to
    if not isinstance(first, str) or not first.strip():
        raise ValueError(f"{where}: missing data.to")
    address = parseaddr(first)[1]  # "Name <a@b>" or a bare address
    return address or first.strip()


def parse_resend(headers: Mapping[str, str], body: bytes) -> list[OutcomeEvent]:
    """The one event in the body; its id is the `svix-id` header (the same on every retry)."""
    payload = json_object(body, "Resend")
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
    named = lowered(headers)
    event_id = named.get("svix-id") or named.get("webhook-id")
    if not event_id or not event_id.strip():
        raise ValueError(f"{where}: missing header svix-id (the event's id)")
    return [event(
        where, ref=_resend_ref(data.get("tags")), type=outcome, id=event_id.strip(),
        occurred_at=iso(payload.get("created_at", data.get("created_at")), where),
        recipient=_resend_recipient(data.get("to"), where),
    )]


class Resend:
    title = "Resend"
    credential = "secret"
    inbound = None

    def credentials(self, source_id: str, given: str) -> tuple[str, BasicAuth | None]:
        return given, None

    def verify(self, headers: Mapping[str, str], body: bytes, *, material: str, source_id: str, now: float) -> str | None:
        verify_resend(headers, body, secret=material, now=now)
        return None

    def parse(self, headers: Mapping[str, str], body: bytes) -> list[OutcomeEvent]:
        return parse_resend(headers, body)

    def verify_inbound(self, headers: Mapping[str, str], *, material: str, source_id: str) -> None:
        """Resend posts no inbound mail of its own: the unguessable inbound URL is the credential."""


PROVIDER = Resend()
