"""Standard Webhooks secrets and signatures (the `standardwebhooks` package does the HMAC)."""

import base64
import secrets
from datetime import datetime

from standardwebhooks import Webhook


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def signed_headers(secret: str, event_id: str, at: datetime, body: str) -> dict[str, str]:
    """`at` must be a UTC datetime: the library mis-signs other zones."""
    return {
        "webhook-id": event_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(event_id, at, body),
        "content-type": "application/json",
    }
