"""The demo's simulated sales team: prospects from the world (`app.simulation`), and what happens to the emails
drafted for them.

Its prospects are look-alikes of the demo's scenarios (a scenario's role, industry, goal and some of its pains, a
name and company of their own) or, for transfer, prospects from industries and roles no training scenario has
(`unseen`). The service sees a prospect as a sales tool would export it (`LookAlike.prospect`, what `POST /drafts`
takes); which scenario it was modelled on, and its reader's traits, stay here.

Sending: each drafted email reaches its prospect's reader in the team's market (the seed), who reads its subject, body
and sender and reacts (`Reader.react`): bounces, privacy proxies' machine opens, human opens and replies of every kind,
each at its own time after `sent_at` (hours to days, heavy-tailed). The outcomes go back as `POST /outcomes` takes
them, each event by its draft's ref, and each reply as the RFC 822 message a provider's inbound parse posts.
"""

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from app.agent.schemas import Email
from app.knowledge_graph.graph import KnowledgeGraph
from app.outcomes.schemas import OutcomeType
from app.outcomes.simulated import SENDER, Window, received, reply_message, sendgrid_records
from app.simulation.kinds import ReplyKind
from app.simulation.people import PARAPHRASES, SimulatedProspect, look_alikes, scenario_prospect, unseen_prospects
from app.simulation.readers import Market, Reaction, Reader

__all__ = ["PARAPHRASES", "LookAlike", "Sent", "SimulatedTeam"]


@dataclass(frozen=True)
class LookAlike:
    prospect: dict  # what the team's CRM exports: id, name, email, company, role, industry, pains, goal
    scenario_id: str  # the demo scenario it is modelled on ("unseen" for none): the world's alone, never sent
    person: SimulatedProspect


@dataclass(frozen=True)
class Sent:
    """One email's fate, as only the world knows it."""

    ref: str
    prospect_id: str
    p_open: float  # P(a human opens it | delivered)
    p_positive: float  # P(interested or meeting | delivered): the truth a benchmark scores with
    delivered: bool
    opened: bool  # by a human
    replied: bool  # by a human (an out-of-office is no reply)
    reply_kind: ReplyKind | None
    reply_message: bytes | None  # the reply (an out-of-office too) as a provider's inbound parse posts it
    recipient: str
    sent_at: datetime
    reaction: Reaction

    @property
    def true_reply(self) -> float:
        return self.p_positive


class SimulatedTeam:
    """The demo's sales team in one market of the world."""

    def __init__(self, graph: KnowledgeGraph, market_seed: int = 0):
        self.graph, self.market = graph, Market(market_seed)
        self._document = {"scenarios": [{"id": s.id, "goal": s.goal, "prospect": s.prospect.model_dump()}
                                        for s in graph.scenarios.values()]}
        self.market.know(*(scenario_prospect(s) for s in self._document["scenarios"]))

    def _team(self, people: list[SimulatedProspect], seed: int) -> list[LookAlike]:
        return [LookAlike(prospect={"id": f"la-{seed}-{n + 1:04d}"} | person.as_draft_prospect(),
                          scenario_id=person.base, person=person) for n, person in enumerate(people)]

    def look_alikes(self, count: int, seed: int, scenario_ids: Sequence[str] | None = None) -> list[LookAlike]:
        """`count` look-alikes of the scenarios (all, or those named), as many of each as can be, in a shuffled order;
        the same seed gives the same prospects."""
        document = self._document
        if scenario_ids:
            document = {"scenarios": [s for s in document["scenarios"] if s["id"] in set(scenario_ids)]}
        return self._team(look_alikes(document, seed, count), seed)

    def unseen(self, count: int, seed: int) -> list[LookAlike]:
        """`count` prospects from industries and roles no training scenario has."""
        return self._team(unseen_prospects(seed, count), seed)

    def reader(self, look_alike: LookAlike) -> Reader:
        return self.market.reader(look_alike.person)

    def probabilities(self, look_alike: LookAlike, email: Email, sender: str = SENDER) -> tuple[float, float]:
        """(P(human open), P(positive reply)) of the email for this prospect, each given delivery."""
        reader, seen = self.reader(look_alike), received(email, sender)
        return reader.open_probability(seen), reader.positive_reply_probability(seen)

    def send(self, drafts: Iterable[tuple[LookAlike, dict]], seed: int, sent_at: datetime,
             sender: str = SENDER) -> tuple[list[Sent], list[dict]]:
        """Sends each drafted email (a draft's `email`: subject, body, citations, ref, message_id) to its prospect:
        what happened to each (the world's), and every event as `POST /outcomes` takes it, dated when it happened
        (the caller reports those due by its clock). Event ids derive from the ref: sending again repeats them."""
        rng = np.random.default_rng([seed, 0x5E7D])
        sent, events = [], []
        for look_alike, draft in drafts:
            email = Email(subject=draft["subject"], body=draft["body"], citations=draft.get("citations", []))
            reader, seen = self.reader(look_alike), received(email, sender)
            reaction = reader.react(seen, rng, sent_at)
            ref, address = draft["ref"], look_alike.prospect["email"]

            def event(kind: OutcomeType, at: datetime, **extra) -> dict:
                return {"ref": ref, "type": kind.value, "occurred_at": at.isoformat(),
                        "id": f"{ref}.{kind.value}{'.machine' if extra.get('machine') else ''}", "recipient": address,
                        **extra}

            human = reaction.reply_kind not in (None, ReplyKind.OUT_OF_OFFICE)
            if reaction.bounced:
                events.append(event(OutcomeType.BOUNCED, sent_at + timedelta(seconds=2)))
            else:
                events.append(event(OutcomeType.DELIVERED, sent_at + timedelta(seconds=2)))
                if reaction.machine_open_at:
                    events.append(event(OutcomeType.OPENED, reaction.machine_open_at, machine=True))
                if reaction.human_open_at:
                    events.append(event(OutcomeType.OPENED, reaction.human_open_at))
                if human:
                    events.append(event(OutcomeType.REPLIED, reaction.reply_at))
            message = None if reaction.reply_kind is None else reply_message(
                reaction, address, email.subject, draft.get("message_id", f"<{ref}@codreamer.invalid>"),
                f"<{ref}.{address.replace('@', '.')}.reply@simulated.invalid>")
            sent.append(Sent(ref=ref, prospect_id=look_alike.prospect["id"], p_open=reader.open_probability(seen),
                             p_positive=reader.positive_reply_probability(seen), delivered=not reaction.bounced,
                             opened=reaction.human_open_at is not None, replied=human, reply_kind=reaction.reply_kind,
                             reply_message=message, recipient=address, sent_at=sent_at, reaction=reaction))
        return sent, events

    @staticmethod
    def as_provider(sent: Iterable[Sent], through: datetime,
                    after: datetime | None = None) -> tuple[bytes, list[bytes]]:
        """What the provider posts about these sends for the span (after, through] of the clock: a SendGrid Event
        Webhook body (sign it with `SimulatedSendGrid.signed`) and the replies that arrived, as RFC 822 messages for
        `POST /outcomes/hooks/{source_id}/inbound`."""
        records, replies = [], []
        for n, s in enumerate(sent):
            report = Window(None if after is None else after - s.sent_at, through - s.sent_at)
            records += sendgrid_records(s.reaction, s.recipient, s.ref, n, s.sent_at, report)
            if s.reply_message is not None and report.holds(s.reaction.reply_at - s.sent_at):
                replies.append(s.reply_message)
        return json.dumps(records).encode(), replies
