"""Standard Webhooks secrets and signatures (the `standardwebhooks` package does the HMAC)."""

import base64
import hashlib
import hmac
import secrets
from datetime import datetime

from cryptography.fernet import Fernet, InvalidToken
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


class SecretUnavailable(RuntimeError):
    """A sealed secret this process cannot open: it was sealed under another SECRET_KEY."""


class SecretBox:
    """Webhook secrets at rest: encrypted with Fernet (AES and an HMAC) under a key derived from SECRET_KEY."""

    def __init__(self, secret_key: str):
        self._fernet = Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret_key.encode()).digest()))
        self._pseudonym_key = hashlib.sha256(b"pseudonym\0" + secret_key.encode()).digest()

    def pseudonym(self, value: str) -> str:
        """A keyed hash (HMAC-SHA256) of a value kept only to tell occurrences apart, such as a recipient's address."""
        return hmac.new(self._pseudonym_key, value.strip().lower().encode(), hashlib.sha256).hexdigest()

    def seal(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def open_url(self, stored: str) -> str:
        """A receiver's webhook URL, sealed at rest since its query may carry a receiver's token; a URL stored plain by an
        earlier release is read as it is."""
        return stored if stored.startswith(("http://", "https://")) else self.open(stored)

    def open_secret(self, stored: str) -> str:
        """A receiver's signing secret; a `whsec_` value stored plain by an earlier release is read as it is."""
        return stored if stored.startswith("whsec_") else self.open(stored)

    def open(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode()).decode()
        except InvalidToken:
            raise SecretUnavailable(
                "cannot sign: the receiver's webhook secret was sealed under another SECRET_KEY "
                "(every process sharing the database must have the same SECRET_KEY)") from None
