"""The demo's simulated sales team: prospects who look like the demo's scenarios, and what happens to the emails
drafted for them.

A look-alike has a name, a company and an address of its own, made up from a seed (first and last names are
combined at random and the companies are invented: no real person), and one demo scenario's role and industry,
two or three of its pains (some in other words) and its goal, addressed to the look-alike. It remembers which
scenario it was modeled on: only the simulator reads that. The service sees the prospect as a sales tool would
export it (`LookAlike.prospect`, what `POST /drafts` takes), and later what happened to each email.

Sending: each drafted email reaches its look-alike, who opens and replies with the simulator's probabilities
(`app.loop.feedback.reply_probabilities`) under the base scenario's hidden preferences, read with the look-alike's
own name and company: a subject that names the scenario's prospect instead is not personal to it. The outcomes go
back as `POST /outcomes` takes them, each event by its draft's ref; bounces and privacy proxies' machine opens
happen at the rates of the demo's provider (`app.outcomes.simulated`).
"""

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from app.agent.schemas import Email
from app.knowledge_graph.graph import KnowledgeGraph
from app.loop.feedback import create_feedback, reply_probabilities
from app.outcomes.schemas import OutcomeType
from app.outcomes.simulated import BOUNCE_RATE, MACHINE_OPEN_RATE

# Four letters or more, and none a part of a word the demo's emails use ("Ana" is in "analytics"): the simulator
# and the outcome model find a name in a subject by its letters. None is a name of the demo's scenarios.
FIRST_NAMES = (
    "Abena", "Akira", "Aurelio", "Beatriz", "Bogdan", "Camille", "Cyrus", "Dagny", "Desmond", "Emeka", "Esther",
    "Farida", "Fenella", "Gustavo", "Hamish", "Ingrid", "Isidro", "Jarrah", "Joaquim", "Katya", "Keziah", "Leopold",
    "Lucinda", "Magnus", "Marisol", "Niamh", "Nikolai", "Oksana", "Osvaldo", "Petra", "Quentin", "Radhika", "Philippa",
    "Soren", "Svetlana", "Tamsin", "Thaddeus", "Ulrike", "Valentin", "Wilhelmina", "Xiomara", "Yusuf", "Zofia",
)
LAST_NAMES = (
    "Abernathy", "Bakshi", "Castellanos", "Dvorak", "Eriksen", "Fairbairn", "Gallagher", "Haddad", "Ishikawa",
    "Jankowski", "Kowalczyk", "Lachance", "Moreau", "Nakashima", "Oyelaran", "Pellegrini", "Quintero", "Rautio",
    "Szabo", "Thorsen", "Umarov", "Vasquez", "Wojcik", "Xenakis", "Yilmaz", "Zeller",
)
# Invented words, so no company of the team's is a real one.
COMPANY_WORDS = (
    "Alderbrook", "Brackwater", "Corvantis", "Dunmere", "Elmstone", "Fallowmark", "Greyhollow", "Harrowgate", "Ironvale",
    "Juniperfield", "Kestavo", "Larchmont", "Marrowind", "Northwick", "Oakhurst", "Pellucid", "Quarrystone", "Rivenhall",
    "Stonebridge", "Thistledown", "Umberline", "Veldtmark", "Westerly", "Yarrowby", "Zephyrine",
)
COMPANY_KINDS = {
    "healthcare": ("Health", "Medical Group", "Clinics"),
    "banking": ("Bank", "Savings Bank", "Trust"),
    "retail": ("Market", "Goods", "Stores"),
    "saas": ("Labs", "Cloud", "Software"),
    "manufacturing": ("Components", "Works", "Industries"),
    "logistics": ("Freight", "Logistics", "Haulage"),
    "insurance": ("Mutual", "Assurance", "Insurance"),
    "fintech": ("Pay", "Finance", "Payments"),
    "public sector": ("County Department of Revenue", "City Finance Office", "Regional Tax Authority"),
}
# The demo's pains in other words: a team's CRM rarely words a pain as the training scenario did.
PARAPHRASES = {
    "PHI leaking into analytics tools": "patient data (PHI) showing up in analytics tools",
    "broken clinical dashboards": "clinical dashboards that keep breaking",
    "HIPAA audit pressure": "pressure from HIPAA audits",
    "slow audit preparation": "audit preparation takes weeks",
    "SOX control evidence scattered across teams": "SOX evidence spread over many teams",
    "regulators asking for data lineage": "regulators want to see data lineage",
    "stale inventory data": "inventory data that is out of date",
    "slow incident response": "incidents take too long to resolve",
    "alert fatigue on the on-call rotation": "on-call engineers drowning in alerts",
    "Snowflake bill growing faster than revenue": "warehouse spend outpacing revenue",
    "no cost attribution by team": "cannot attribute cloud cost to teams",
    "unpredictable month-end cloud invoices": "cloud invoices that surprise us at month-end",
    "sensor data gaps": "gaps in sensor data",
    "unplanned downtime on production lines": "production lines stopping without warning",
    "manual shift reporting": "shift reports still done by hand",
    "overnight pipeline failures": "pipelines failing overnight",
    "too many noisy Airflow alerts": "noisy Airflow alerting",
    "late ETA updates to customers": "customers get ETA updates late",
    "vendor security reviews take months": "months-long vendor security reviews",
    "access control sprawl": "sprawling access controls",
    "PII exposure in claims data": "PII exposed in claims data",
    "settlement reconciliation errors": "errors reconciling settlements",
    "keeping PCI DSS scope small": "PCI DSS scope creeping",
    "incident response not scaling with volume": "incident response cannot keep up with volume",
    "thousands of staff hours spent on manual reporting": "staff spending thousands of hours on manual reports",
    "procurement and security approval hurdles": "slow procurement and security approvals",
    "legacy on-prem systems": "legacy on-premises systems",
    "GDPR data residency questions from EU customers": "EU customers asking where their data resides (GDPR)",
    "schema changes breaking customer dashboards": "schema changes that break customer dashboards",
    "alert fatigue": "too many alerts",
}
PARAPHRASE_SHARE = 0.5  # of a look-alike's pains, in other words
REPLY_DELAY = timedelta(hours=2)


@dataclass(frozen=True)
class LookAlike:
    prospect: dict  # what the team's CRM exports: id, name, email, company, role, industry, pains, goal
    scenario_id: str  # the demo scenario it is modeled on: the simulator's alone, never sent to the service


@dataclass(frozen=True)
class Sent:
    """One email's fate, as only the simulator knows it."""

    ref: str
    prospect_id: str
    p_open: float
    p_reply: float  # given an open
    delivered: bool
    opened: bool
    replied: bool

    @property
    def true_reply(self) -> float:
        """The probability that this email gets a reply: P(open) · P(reply | open)."""
        return self.p_open * self.p_reply


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


class SimulatedTeam:
    """The demo's sales team: its prospects are look-alikes of the demo's scenarios, its sends are simulated."""

    def __init__(self, graph: KnowledgeGraph):
        simulator = create_feedback(graph)
        if simulator is None:
            raise ValueError(f"graph {graph.id!r} has no simulated prospects (only the demo has)")
        self.graph, self.simulator = graph, simulator

    def look_alikes(self, count: int, seed: int, scenario_ids: Sequence[str] | None = None) -> list[LookAlike]:
        """`count` prospects, as many of each scenario as can be (in a shuffled order), each with a name of its own
        in the batch; the same seed gives the same prospects."""
        scenarios = [self.graph.scenarios[s] for s in (scenario_ids or list(self.graph.scenarios))]
        taken = {(s.prospect.name, s.prospect.company) for s in self.graph.scenarios.values()}
        rng = np.random.default_rng([seed, 0x10CA1])
        bases = [scenarios[n % len(scenarios)] for n in range(count)]
        order = rng.permutation(count)
        people = rng.permutation(len(FIRST_NAMES) * len(LAST_NAMES))
        if count > len(people):
            raise ValueError(f"at most {len(people)} look-alikes in a batch")
        team = []
        for n, index in enumerate(order):
            scenario = bases[index]
            first, last = FIRST_NAMES[people[n] // len(LAST_NAMES)], LAST_NAMES[people[n] % len(LAST_NAMES)]
            kinds = COMPANY_KINDS.get(scenario.prospect.industry.lower(), ("Group", "Holdings", "Partners"))
            company = f"{COMPANY_WORDS[rng.integers(len(COMPANY_WORDS))]} {kinds[rng.integers(len(kinds))]}"
            assert (f"{first} {last}", company) not in taken
            pains = list(scenario.prospect.pains)
            kept = rng.choice(len(pains), size=min(len(pains), int(rng.integers(2, 4))), replace=False)
            pains = [PARAPHRASES.get(pains[i], pains[i]) if rng.random() < PARAPHRASE_SHARE else pains[i] for i in kept]
            scenario_first = scenario.prospect.name.split(" ")[0]
            team.append(LookAlike(prospect={
                "id": f"la-{seed}-{n + 1:04d}", "name": f"{first} {last}",
                "email": f"{first.lower()}.{last.lower()}@{_slug(company)}.example", "company": company,
                "role": scenario.prospect.role, "industry": scenario.prospect.industry, "pains": pains,
                "goal": re.sub(rf"\b{re.escape(scenario_first)}\b", first, scenario.goal),
            }, scenario_id=scenario.id))
        return team

    def probabilities(self, look_alike: LookAlike, email: Email) -> tuple[float, float]:
        """(P(open), P(reply | open)) of the email for this look-alike: its base scenario's preferences, its own name."""
        return reply_probabilities(email, look_alike.prospect, self.simulator.preferences[look_alike.scenario_id])

    def send(self, drafts: Iterable[tuple[LookAlike, dict]], seed: int, sent_at: datetime) -> tuple[list[Sent], list[dict]]:
        """Sends each drafted email (a draft's `email`: subject, body, citations, ref) to its look-alike: what
        happened to each (the simulator's), and the events as `POST /outcomes` takes them (the service's). Event ids
        derive from the ref, so sending again reports the same events."""
        rng = np.random.default_rng([seed, 0x5E7D])
        sent, events = [], []
        for look_alike, draft in drafts:
            email = Email(subject=draft["subject"], body=draft["body"], citations=draft["citations"])
            p_open, p_reply = self.probabilities(look_alike, email)
            ref, address = draft["ref"], look_alike.prospect["email"]
            bounced, machine, opened, replied = (rng.random() < BOUNCE_RATE, rng.random() < MACHINE_OPEN_RATE,
                                                 rng.random() < p_open, rng.random() < p_reply)
            opened, replied = opened and not bounced, replied and opened and not bounced

            def event(kind: OutcomeType, delay: timedelta, **extra) -> dict:
                return {"ref": ref, "type": kind.value, "occurred_at": (sent_at + delay).isoformat(),
                        "id": f"{ref}.{kind.value}{'.machine' if extra.get('machine') else ''}", "recipient": address, **extra}

            if bounced:
                events.append(event(OutcomeType.BOUNCED, timedelta(seconds=2)))
            else:
                events.append(event(OutcomeType.DELIVERED, timedelta(seconds=2)))
                if machine:
                    events.append(event(OutcomeType.OPENED, timedelta(seconds=3), machine=True))
                if opened:
                    events.append(event(OutcomeType.OPENED, timedelta(minutes=10)))
                if replied:
                    events.append(event(OutcomeType.REPLIED, REPLY_DELAY, category="interested"))  # its replies are all keen
            sent.append(Sent(ref=ref, prospect_id=look_alike.prospect["id"], p_open=p_open, p_reply=p_reply,
                             delivered=not bounced, opened=opened, replied=replied))
        return sent, events
