"""The ref every email the service writes carries, so that what happens to it once sent can find its way back.

A ref is derived from where the email was written (run, iteration, slot), so a step that runs again
writes the same ref; it is opaque to senders, who only echo it (as `codreamer_ref`, or in the
Message-ID a reply threads to).
"""

import base64
import hashlib

PREFIX = "eml_"
PUBLISHED = -1  # the slot of an iteration's published email; a trajectory's is its position


def email_ref(run_id: str, iteration: int, slot: int) -> str:
    digest = hashlib.blake2b(f"{run_id}/{iteration}/{slot}".encode(), digest_size=15).digest()
    return PREFIX + base64.b32encode(digest).decode().lower()[:20]


def message_id(ref: str, domain: str) -> str:
    """The RFC 5322 Message-ID to send the email with: a reply's In-Reply-To then names the ref."""
    return f"<{ref}@{domain}>"

