"""The demo's email provider: it sends a published email to look-alike prospects and reports what happened the way
SendGrid does (Event Webhook records, machine opens included) and the way replies arrive (RFC 822 messages), so the
simulated outcomes enter the loop through the same ingestion, model and blend as real ones.

The prospects' reactions come from the demo's hidden preferences (`app.loop.feedback.reply_probabilities`);
only the benchmark reads those probabilities directly.
"""

import json
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime

import numpy as np

from app.agent.schemas import Email
from app.loop.feedback import FeedbackSimulator, reply_probabilities

SENDS = 50  # look-alike prospects per published email
AB_SENDS = 10  # per candidate, with simulated_ab
BOUNCE_RATE = 0.02
MACHINE_OPEN_RATE = 0.3  # privacy proxies that fetch every image on delivery


def campaign(simulator: FeedbackSimulator, scenario_id: str, email: Email, ref: str, message_id: str, seed: int,
             sent_at: datetime, sends: int = SENDS) -> tuple[bytes, list[bytes]]:
    """(a SendGrid Event Webhook body, the raw replies) of sending `email` to `sends` look-alikes of the scenario's
    prospect. Event ids derive from the ref, so sending the same email again reports the same events."""
    p_open, p_reply = reply_probabilities(email, simulator.prospects[scenario_id], simulator.preferences[scenario_id])
    rng = np.random.default_rng(seed)
    records, replies = [], []
    for n in range(sends):
        address = f"lookalike-{n}@{scenario_id}.prospects.invalid"
        at = int((sent_at + timedelta(seconds=n)).timestamp())

        def record(event: str, delay_s: int = 0, **extra) -> dict:
            return {"email": address, "timestamp": at + delay_s, "event": event, "sg_event_id": f"{ref}.{n}.{event}",
                    "sg_message_id": f"{ref}.{n}", "codreamer_ref": ref, **extra}

        if rng.random() < BOUNCE_RATE:
            records.append(record("bounce", type="bounce", status="5.1.1", reason="550 5.1.1 no such user"))
            continue
        records.append(record("delivered", 2, response="250 OK"))
        if rng.random() < MACHINE_OPEN_RATE:
            records.append(record("open", 3, sg_machine_open=True) | {"sg_event_id": f"{ref}.{n}.machine-open"})
        if rng.random() < p_open:
            records.append(record("open", 600, sg_machine_open=False))
            if rng.random() < p_reply:
                replies.append(_reply(address, email, message_id, f"<{ref}.{n}.reply@{scenario_id}.prospects.invalid>",
                                      sent_at + timedelta(hours=2, seconds=n)))
    return json.dumps(records).encode(), replies


def _reply(sender: str, email: Email, in_reply_to: str, message_id: str, at: datetime) -> bytes:
    reply = EmailMessage()
    reply["From"], reply["To"], reply["Subject"] = sender, "sales@example.com", f"Re: {email.subject}"
    reply["Message-ID"], reply["In-Reply-To"], reply["References"] = message_id, in_reply_to, in_reply_to
    reply["Date"] = format_datetime(at)
    reply.set_content("Thanks, this is relevant to us. Happy to talk.\n")
    return bytes(reply)
