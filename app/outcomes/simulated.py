"""The demo's email provider: it sends a published email to simulated readers (`app.simulation`) and reports what
they did the way SendGrid does (Event Webhook records, machine opens flagged `sg_machine_open`) and the way replies
arrive (RFC 822 messages with the reader's text), so simulated outcomes enter the loop through the same parsers,
ingestion, model and blend as real ones.

The readers are the graph scenario's prospect and others like them on paper (the same name, company, role, industry and
pains; traits of their own), in the market the run's seed draws. They see only the subject, the body and the sender.

Simulated time is compressed: an iteration of the demo stands for one reply window (`SIMULATED_STEP`) of the world's
time. A run's campaigns are dated on a timeline that ends one window before the run was created, iteration `j`'s at
`created_at − (iterations_total + 1 − j) · SIMULATED_STEP`; at iteration `i` the provider reports what happened in the
world's window `i` (so a reply four days after its send arrives two iterations later, as it would two reply windows
on). Every timestamp lies in the past, and delivered sends older than the reply window count as mature for the outcome
model, replied or not, as real ones do.
"""

import base64
import json
import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime

import numpy as np
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from app.agent.schemas import Email
from app.knowledge_graph.graph import KnowledgeGraph
from app.loop.outcome_model import Estimate, FeedbackSource
from app.simulation.people import SimulatedProspect, scenario_prospect
from app.simulation.rates import WorldRates
from app.simulation.readers import Market, Reaction, Received

SENDS = 50  # readers per published email
AB_SENDS = 10  # per candidate, with simulated_ab
ORACLE_READERS = 10  # readers the oracle averages over
SIMULATED_STEP = timedelta(days=3, hours=1)  # of the world's time per iteration: one reply window and an hour
# how many iterations after its send a campaign still reports (the world's latest reaction is max_delay_days on)
LATE_ITERATIONS = math.ceil(WorldRates().max_delay_days * 86400 / SIMULATED_STEP.total_seconds())
SENDER = "Alex Morgan <alex.morgan@lumora.example>"  # who the demo's emails come from
SIMULATED_GRAPHS = ("demo",)  # graphs whose scenarios are the world's prospects


def received(email: Email, sender: str = SENDER) -> Received:
    return Received(subject=email.subject, body=email.body, sender=sender)


@dataclass(frozen=True)
class Window:
    """The span of the world's time (after each send) whose events one report carries: (after, through]."""

    after: timedelta | None
    through: timedelta

    def holds(self, at: timedelta) -> bool:
        return (self.after is None or at > self.after) and at <= self.through


def window(sent_iteration: int, now_iteration: int) -> Window:
    """What the report at iteration `now_iteration` carries of the campaign sent at `sent_iteration`."""
    age = now_iteration - sent_iteration
    return Window(after=None if age == 0 else age * SIMULATED_STEP, through=(age + 1) * SIMULATED_STEP)


def campaign_sent_at(created_at: datetime, iterations_total: int, iteration: int) -> datetime:
    return created_at - (iterations_total + 1 - iteration) * SIMULATED_STEP


class SimulatedWorld:
    """The demo graph's scenarios as readers of one market (the run's seed)."""

    def __init__(self, graph: KnowledgeGraph, seed: int):
        self.market = Market(seed)
        self.prospects: dict[str, SimulatedProspect] = {
            s.id: scenario_prospect({"id": s.id, "goal": s.goal, "prospect": s.prospect.model_dump()})
            for s in graph.scenarios.values()}
        self.market.know(*self.prospects.values())

    def readers(self, scenario_id: str, count: int):
        return [self.market.reader(self.prospects[scenario_id], person) for person in range(count)]

    def estimate(self, scenario_id: str, email: Email | None, seed: int) -> Estimate:
        """The oracle (`feedback_source: oracle`, a benchmark's upper bound): every candidate rated by the world's own
        probabilities, averaged over ORACLE_READERS readers, at full confidence."""
        if email is None:
            return Estimate.of_rates(0.0, 0.0, 1.0, FeedbackSource.OBSERVED)
        readers, seen = self.readers(scenario_id, ORACLE_READERS), received(email)
        p_open = float(np.mean([r.open_probability(seen) for r in readers]))
        p_reply = float(np.mean([r.positive_reply_probability(seen) for r in readers]))
        return Estimate.of_rates(p_open, p_reply, 1.0, FeedbackSource.OBSERVED)


def world_for(graph: KnowledgeGraph, seed: int) -> SimulatedWorld | None:
    """Only the demo graph's scenarios are the world's prospects (elsewhere outcomes come from real sends)."""
    return SimulatedWorld(graph, seed) if has_world(graph) else None


def has_world(graph: KnowledgeGraph) -> bool:
    return graph.id in SIMULATED_GRAPHS


def campaign(world: SimulatedWorld, scenario_id: str, email: Email, ref: str, message_id: str, seed: int,
             sent_at: datetime, sends: int = SENDS,
             report: Window = Window(None, SIMULATED_STEP)) -> tuple[bytes, list[bytes]]:
    """(a SendGrid Event Webhook body, the raw replies) of what `sends` readers did with `email` sent at `sent_at`,
    as far as it happened within `report`. Event ids derive from the ref, so a report repeats no event of another."""
    rng = np.random.default_rng(seed)
    seen = received(email)
    records, replies = [], []
    for n, reader in enumerate(world.readers(scenario_id, sends)):
        reaction = reader.react(seen, rng, sent_at)
        address = f"reader-{n}@{scenario_id}.prospects.invalid"
        records += _events(reaction, address, ref, n, sent_at, report)
        if reaction.reply_kind is not None and report.holds(reaction.reply_at - sent_at):
            replies.append(reply_message(reaction, address, email.subject, message_id,
                                         f"<{ref}.{n}.reply@{scenario_id}.prospects.invalid>"))
    return json.dumps(records).encode(), replies


def _events(reaction: Reaction, address: str, ref: str, n: int, sent_at: datetime, report: Window) -> list[dict]:
    def record(event: str, at: datetime, suffix: str = "", **extra) -> dict:
        return {"email": address, "timestamp": int(at.timestamp()), "event": event,
                "sg_event_id": f"{ref}.{n}.{event}{suffix}", "sg_message_id": f"{ref}.{n}", "codreamer_ref": ref,
                **extra}

    delivered_at = sent_at + timedelta(seconds=2)
    bounce = {"type": "bounce", "status": "5.1.1", "reason": "550 5.1.1 no such user"}
    happened = [("bounce", delivered_at, "", bounce)] \
        if reaction.bounced else [("delivered", delivered_at, "", {"response": "250 OK"})]
    if reaction.machine_open_at:
        happened.append(("open", reaction.machine_open_at, ".machine", {"sg_machine_open": True}))
    if reaction.human_open_at:
        happened.append(("open", reaction.human_open_at, "", {"sg_machine_open": False}))
    return [record(event, at, suffix, **extra) for event, at, suffix, extra in happened if report.holds(at - sent_at)]


class SimulatedSendGrid:
    """The simulated provider as a SendGrid account: its Event Webhook posts signed as SendGrid signs them (ECDSA P-256
    over timestamp + body), so they pass `POST /outcomes/hooks/{source_id}` of a source made with its key."""

    def __init__(self):
        self._key = ec.generate_private_key(ec.SECP256R1())

    @property
    def verification_key(self) -> str:
        """What `POST /outcome-sources` takes as `verification_key` (base64 DER, as SendGrid shows it)."""
        der = self._key.public_key().public_bytes(serialization.Encoding.DER,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)
        return base64.b64encode(der).decode()

    def signed(self, body: bytes, timestamp: int) -> dict[str, str]:
        """The headers SendGrid sends an Event Webhook body with, signed at `timestamp` (unix seconds)."""
        signature = self._key.sign(str(timestamp).encode() + body, ec.ECDSA(hashes.SHA256()))
        return {"X-Twilio-Email-Event-Webhook-Signature": base64.b64encode(signature).decode(),
                "X-Twilio-Email-Event-Webhook-Timestamp": str(timestamp), "Content-Type": "application/json"}


def sendgrid_records(reaction: Reaction, address: str, ref: str, n: int, sent_at: datetime,
                     report: Window) -> list[dict]:
    """One send's Event Webhook records that happened within `report` of its send."""
    return _events(reaction, address, ref, n, sent_at, report)


def reply_message(reaction: Reaction, sender: str, subject: str, in_reply_to: str, message_id: str) -> bytes:
    """A reply as it arrives: threaded to the sent email, the reader's text, an auto-reply marked as RFC 3834 says."""
    reply = EmailMessage()
    reply["From"], reply["To"], reply["Subject"] = sender, SENDER, f"Re: {subject}"
    reply["Message-ID"], reply["In-Reply-To"], reply["References"] = message_id, in_reply_to, in_reply_to
    reply["Date"] = format_datetime(reaction.reply_at)
    if reaction.returns_on is not None:
        reply.replace_header("Subject", f"Automatic reply: {subject}")
        reply["Auto-Submitted"] = "auto-replied"
    reply.set_content(reaction.reply_text + "\n")
    return bytes(reply)
