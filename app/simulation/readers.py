"""Readers who read the text: each simulated prospect sees only subject, body and sender, and reacts by hidden traits.

A market (one seed) draws its traits at three levels: per industry (what persuades its people, how hollow claims and
facts about other industries put them off, how responsive they are), per role (the ask they answer, the detail they
weigh, the length they tolerate) and per person (how much each of their pains matters, their own stack of tools, their
own share of each trait). Nobody in the service can see these; they can only be learned from what readers do.
"""

import math
import re
import zlib
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import numpy as np

from app.simulation.kinds import NEGATIVE, POSITIVE, Ask, Persuader, ReplyKind
from app.simulation.lexicon import INDUSTRY_TOOLS, INDUSTRY_WORDS, TOOLS
from app.simulation.people import SimulatedProspect
from app.simulation.rates import WorldRates
from app.simulation.reading import Reading, Sentence, content_stems, mentions, pain_words, read
from app.simulation.replies import write_reply

__all__ = ["Market", "Reaction", "Reader", "Received", "ReplyKind", "Traits", "WorldRates", "POSITIVE", "NEGATIVE"]


@dataclass(frozen=True)
class Received:
    """All a real prospect sees of an email."""

    subject: str
    body: str
    sender: str  # "Name <address>" or a bare address


@dataclass(frozen=True)
class Reaction:
    """What one send did."""

    bounced: bool
    machine_open_at: datetime | None  # a privacy proxy fetched the images
    human_open_at: datetime | None
    reply_kind: ReplyKind | None
    reply_at: datetime | None
    reply_text: str | None
    returns_on: date | None  # an out-of-office's return date


# Role functions, by words in the title (the reader's own rules), and their priors.
_FUNCTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("security", ("ciso", "security", "compliance", "privacy", "risk", "counsel", "legal", "audit")),
    ("finance", ("cfo", "finance", "financial", "controller", "treasurer", "revenue", "procurement")),
    ("data", ("data", "analytics", "bi ", "insight")),
    ("engineering", ("cto", "engineering", "engineer", "platform", "developer", "devops", "technology", "it ")),
    ("operations", ("coo", "operations", "ops", "plant", "supply")),
)
_ASK_PRIOR = {
    "security": {Ask.RESOURCE: 0.5, Ask.MEETING: 0.3, Ask.REPLY: 0.15, Ask.TRIAL: 0.05},
    "finance": {Ask.MEETING: 0.45, Ask.RESOURCE: 0.3, Ask.REPLY: 0.2, Ask.TRIAL: 0.05},
    "data": {Ask.TRIAL: 0.4, Ask.RESOURCE: 0.3, Ask.MEETING: 0.2, Ask.REPLY: 0.1},
    "engineering": {Ask.TRIAL: 0.35, Ask.RESOURCE: 0.25, Ask.MEETING: 0.25, Ask.REPLY: 0.15},
    "operations": {Ask.MEETING: 0.4, Ask.RESOURCE: 0.25, Ask.REPLY: 0.25, Ask.TRIAL: 0.1},
    "general": {Ask.MEETING: 0.35, Ask.RESOURCE: 0.3, Ask.REPLY: 0.25, Ask.TRIAL: 0.1},
}
_PERSUADER_PRIOR = {
    "security": {Persuader.PEER: 0.9, Persuader.INTEGRATION: 0.6, Persuader.NUMBER: 0.5, Persuader.PRICE: 0.15},
    "finance": {Persuader.PRICE: 1.0, Persuader.NUMBER: 0.9, Persuader.PEER: 0.6, Persuader.INTEGRATION: 0.25},
    "data": {Persuader.INTEGRATION: 1.0, Persuader.NUMBER: 0.8, Persuader.PEER: 0.5, Persuader.PRICE: 0.2},
    "engineering": {Persuader.INTEGRATION: 1.0, Persuader.NUMBER: 0.7, Persuader.PEER: 0.5, Persuader.PRICE: 0.2},
    "operations": {Persuader.NUMBER: 1.0, Persuader.PEER: 0.7, Persuader.INTEGRATION: 0.35, Persuader.PRICE: 0.4},
    "general": {Persuader.NUMBER: 0.8, Persuader.PEER: 0.8, Persuader.INTEGRATION: 0.5, Persuader.PRICE: 0.4},
}
_EXECUTIVE = re.compile(r"\b(chief|c[a-z]{1,2}o|vp|vice president|president|head|director)\b", re.IGNORECASE)
_NOT_A_NAME = {"there", "team", "all", "folks", "everyone", "friend"}

# How what a reader finds moves its log-odds of a reply (the world's formula; tests/unit/test_simulation.py pins it).
MENTION_CREDIT = 0.35  # a pain named without a detail that persuades
NO_ASK = -0.8
ASK_ANSWERED = 0.6  # the ask this reader answers
ASK_OTHER = 0.1
EXTRA_ASK = -0.45  # per ask beyond the first
OVER_LENGTH = -1.3  # per unit of log(words / tolerance) over it
TOO_SHORT = -0.5  # under 25 words: nothing to go on
REPEATED_NAME = -0.35  # per mention beyond the first of their name (or the second of their company)
WRONG_NAME = -2.5  # greets someone else, or names another prospect or company
SUBJECT_OWN = 0.4  # an open is likelier for a subject about them or their pains
SUBJECT_LONG = -0.5  # over 9 words
SUBJECT_PUSHY = -0.6  # shouting, exclamation marks, hollow claims


def _key(*parts: str) -> int:
    return zlib.crc32("\x1f".join(parts).lower().encode())


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x)) if x >= 0 else math.exp(x) / (1 + math.exp(x))


def role_function(role: str) -> str:
    padded = f" {role.lower()} "
    return next((name for name, words in _FUNCTIONS if any(w in padded for w in words)), "general")


@dataclass(frozen=True)
class Traits:
    """One reader's hidden traits."""

    pain_weights: tuple[float, ...]  # how much each stated pain matters (summing to 1)
    length_tolerance: float  # words before length costs
    persuaders: dict[Persuader, float]  # how much each kind of detail persuades (the strongest is 1)
    ask: Ask  # the ask they answer
    stack: frozenset[str]  # tools their team runs
    hollow_aversion: float  # log-odds lost per hollow claim
    off_industry_aversion: float  # log-odds lost per sentence about another industry
    responsiveness: float  # their own shift of log-odds (industry and person)
    opens: float  # their own shift of the log-odds of opening


class Market:
    """One market: the traits of its industries, roles and people drawn from a seed."""

    def __init__(self, seed: int, rates: WorldRates | None = None):
        self.seed = seed
        self.rates = rates or WorldRates()
        low, high = self.rates.hard_bounce
        self.bounce_rate = float(np.random.default_rng([seed, 0xB0]).uniform(low, high))
        self._industries: dict[str, dict] = {}
        self._roles: dict[tuple[str, str], dict] = {}
        self._known_people: set[str] = set()
        self._known_companies: set[str] = set()

    def _rng(self, *parts: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, _key(*parts)])

    def _industry(self, industry: str) -> dict:
        if industry not in self._industries:
            self._industries[industry] = self._draw_industry(industry)
        return self._industries[industry]

    def _role(self, industry: str, role: str) -> dict:
        if (industry, role) not in self._roles:
            self._roles[industry, role] = self._draw_role(industry, role)
        return self._roles[industry, role]

    def _draw_industry(self, industry: str) -> dict:
        rng = self._rng("industry", industry)
        return {"persuaders": {p: float(rng.lognormal(0, 0.35)) for p in Persuader},
                "hollow": float(rng.gamma(4, 0.35 / 4)), "off": float(rng.gamma(4, 0.5 / 4)),
                "responsiveness": float(rng.normal(0, 0.3)), "length": float(rng.lognormal(0, 0.2)),
                "common_tools": tuple(rng.permutation(INDUSTRY_TOOLS.get(industry, TOOLS[:8]))[:2])}

    def _draw_role(self, industry: str, role: str) -> dict:
        function = role_function(role)
        rng = self._rng("role", industry, function)
        prior = _ASK_PRIOR[function]
        asks = rng.dirichlet([30 * prior[a] for a in Ask])
        return {"function": function, "asks": asks, "executive": bool(_EXECUTIVE.search(role)),
                "persuaders": {p: _PERSUADER_PRIOR[function][p] * float(rng.lognormal(0, 0.25)) for p in Persuader}}

    def traits(self, prospect: SimulatedProspect, person: int = 0) -> Traits:
        """The traits of this prospect (or, with `person`, of one more reader just like them on paper)."""
        industry, role = self._industry(prospect.industry.lower()), self._role(prospect.industry.lower(), prospect.role)
        rng = self._rng("person", prospect.email, str(person))
        weights = rng.dirichlet([0.8] * len(prospect.pains)) if prospect.pains else np.array([])
        raw = {p: role["persuaders"][p] * industry["persuaders"][p] * float(rng.lognormal(0, 0.3)) for p in Persuader}
        strongest = max(raw.values())
        tolerance = (90 if role["executive"] else 140) * industry["length"] * float(rng.lognormal(0, 0.3))
        named = {t for pain in prospect.pains for t in mentions(pain.lower(), TOOLS)}
        stack = frozenset(industry["common_tools"]) | {TOOLS[int(rng.integers(len(TOOLS)))]} | named
        return Traits(
            pain_weights=tuple(float(w) for w in weights), length_tolerance=float(np.clip(tolerance, 40, 300)),
            persuaders={p: v / strongest for p, v in raw.items()},
            ask=list(Ask)[int(rng.choice(len(Ask), p=role["asks"]))],
            stack=stack, hollow_aversion=industry["hollow"] * float(rng.lognormal(0, 0.3)),
            off_industry_aversion=industry["off"] * float(rng.lognormal(0, 0.3)),
            responsiveness=industry["responsiveness"] + float(rng.normal(0, 0.4)), opens=float(rng.normal(0, 0.3)))

    def know(self, *prospects: SimulatedProspect) -> None:
        """People of this market: an email to someone else that names one of them (or their company) was written for
        another reader, and its reader sees it. Everyone a reader is made for is known."""
        self._known_people.update(p.name.lower() for p in prospects)
        self._known_companies.update(p.company.lower() for p in prospects)

    def reader(self, prospect: SimulatedProspect, person: int = 0) -> "Reader":
        self.know(prospect)
        return Reader(self, prospect, self.traits(prospect, person))


@dataclass(frozen=True)
class Impression:
    """What a reader made of an email, term by term (log-odds), for tests and for explaining a probability."""

    relevance: float  # Σ over pains answered: weight · (MENTION_CREDIT + (1 − MENTION_CREDIT) · persuasion)
    ask: float
    length: float
    hollow: float
    off_industry: float
    names: float
    wrong: float
    open_terms: float

    @property
    def annoyance(self) -> float:
        return -(min(0.0, self.ask) + self.length + self.hollow + self.off_industry + self.names + self.wrong)


class Reader:
    """One simulated prospect reading emails."""

    def __init__(self, market: Market, prospect: SimulatedProspect, traits: Traits):
        self.market, self.prospect, self.traits = market, prospect, traits
        self._impressions: dict[Received, Impression] = {}

    # ------------------------------------------------------------------ reading
    def _persuasion(self, sentences: list[Sentence]) -> float:
        own, stack, weights = self.prospect.industry.lower(), self.traits.stack, self.traits.persuaders
        found = set()
        for s in sentences:
            if s.number:
                found.add(Persuader.NUMBER)
            if s.customer and own in s.industries:
                found.add(Persuader.PEER)
            if stack & set(s.tools):
                found.add(Persuader.INTEGRATION)
            if s.price:
                found.add(Persuader.PRICE)
        return max((weights[p] for p in found), default=0.0)

    def _relevance(self, reading: Reading) -> float:
        sentences = [s for s in reading.sentences if s.ask is None]
        total = 0.0
        for weight, pain in zip(self.traits.pain_weights, self.prospect.pains):
            words = pain_words(pain)
            speaking = [i for i, s in enumerate(sentences) if len(s.stems & words) >= 2]
            if not speaking:
                continue
            near = [sentences[j] for i in speaking for j in (i, i + 1) if j < len(sentences)]
            total += weight * (MENTION_CREDIT + (1 - MENTION_CREDIT) * self._persuasion(near))
        return total

    def _wrong(self, email: Received, reading: Reading) -> bool:
        p = self.prospect
        if reading.greeting_name and reading.greeting_name.lower() not in {p.first_name.lower(), p.last_name.lower()} \
                | _NOT_A_NAME:
            return True
        text = f"{email.subject}\n{email.body}".lower()
        others = (self.market._known_people - {p.name.lower()}) | (self.market._known_companies - {p.company.lower()})
        return any(mentions(text, [o]) for o in others if o and o in text)

    def impression(self, email: Received) -> Impression:
        if email not in self._impressions:
            if len(self._impressions) > 64:
                self._impressions.clear()
            self._impressions[email] = self._impression(email)
        return self._impressions[email]

    def _impression(self, email: Received) -> Impression:
        reading = read(email.subject, email.body)
        t, p = self.traits, self.prospect
        asks = reading.asks
        if not asks:
            ask = NO_ASK
        else:
            ask = (ASK_ANSWERED if any(s.ask == t.ask for s in asks) else ASK_OTHER) + EXTRA_ASK * (len(asks) - 1)
        length = OVER_LENGTH * max(0.0, math.log(max(reading.words, 1) / t.length_tolerance))
        length += TOO_SHORT if reading.words < 25 else 0.0
        hollow = -t.hollow_aversion * min(3, sum(s.hollow for s in reading.sentences))
        own = p.industry.lower()
        off = sum(1 for s in reading.sentences if s.industries and own not in s.industries) \
            if own in INDUSTRY_WORDS else 0
        off_industry = -t.off_industry_aversion * min(3, off)
        body = email.body.lower()
        first = len(re.findall(rf"(?<![a-z]){re.escape(p.first_name.lower())}(?![a-z])", body))
        company = len(re.findall(rf"(?<![a-z]){re.escape(p.company.lower())}(?![a-z])", body))
        names = REPEATED_NAME * (max(0, first - 1) + max(0, company - 2))
        wrong = WRONG_NAME if self._wrong(email, reading) else 0.0
        subject = email.subject
        about_them = p.company.lower() in subject.lower() or any(
            len(content_stems(subject) & pain_words(pain)) >= 1 for pain in p.pains)
        pushy = "!" in subject or any(w.isupper() and len(w) > 3 for w in subject.split()) or any(
            s.hollow for s in read("", subject).sentences)
        open_terms = (SUBJECT_OWN * about_them + SUBJECT_LONG * (len(subject.split()) > 9) + SUBJECT_PUSHY * pushy
                      + (WRONG_NAME / 2 if wrong else 0.0))
        return Impression(relevance=self._relevance(reading), ask=ask, length=length, hollow=hollow,
                          off_industry=off_industry, names=names, wrong=wrong, open_terms=open_terms)

    # ------------------------------------------------------------------ probabilities
    def _positive_logit(self, i: Impression) -> float:
        r = self.market.rates
        return (r.positive_base_logit + self.traits.responsiveness + r.relevance_gain * i.relevance + i.ask + i.length
                + i.hollow + i.off_industry + i.names + i.wrong)

    def positive_reply_probability(self, email: Received) -> float:
        """P(interested or meeting | delivered): the truth a benchmark scores with."""
        return _sigmoid(self._positive_logit(self.impression(email)))

    def negative_reply_probability(self, email: Received) -> float:
        """P(not interested or unsubscribe | delivered)."""
        i = self.impression(email)
        return _sigmoid(self.market.rates.negative_base_logit + 0.5 * i.annoyance - 0.6 * i.relevance)

    def open_probability(self, email: Received) -> float:
        """P(a human opens it | delivered)."""
        i = self.impression(email)
        return _sigmoid(self.market.rates.human_open_logit + self.traits.opens + i.open_terms)

    def reply_kind_probabilities(self, email: Received) -> dict[ReplyKind, float]:
        """P(each kind of reply | delivered); out-of-office is the rest of the world's, not the email's."""
        r, i = self.market.rates, self.impression(email)
        positive = _sigmoid(self._positive_logit(i))
        negative = _sigmoid(r.negative_base_logit + 0.5 * i.annoyance - 0.6 * i.relevance)
        misdirected = r.misdirected_rate * (2.0 if i.relevance == 0 else 1.0)
        return {ReplyKind.MEETING: positive * r.meeting_share, ReplyKind.INTERESTED: positive * (1 - r.meeting_share),
                ReplyKind.QUESTION: positive * r.question_share,
                ReplyKind.NOT_INTERESTED: negative * (1 - r.unsubscribe_share),
                ReplyKind.UNSUBSCRIBE: negative * r.unsubscribe_share, ReplyKind.REFERRAL: misdirected / 2,
                ReplyKind.WRONG_PERSON: misdirected / 2}

    # ------------------------------------------------------------------ acting
    def _delay(self, rng: np.random.Generator, median_h: float) -> timedelta:
        r = self.market.rates
        hours = float(rng.lognormal(math.log(median_h), r.delay_sigma))
        return timedelta(hours=min(max(hours, 0.05), r.max_delay_days * 24))

    def react(self, email: Received, rng: np.random.Generator, sent_at: datetime) -> Reaction:
        """What happens when this email is sent to this reader at `sent_at` (the generator makes it repeatable)."""
        r = self.market.rates
        if rng.random() < self.market.bounce_rate:
            return Reaction(True, None, None, None, None, None, None)
        proxied = rng.random() < r.machine_open_share
        machine = sent_at + timedelta(seconds=float(rng.uniform(2, 120))) if proxied else None
        sender = _first_name(email.sender)
        if rng.random() < r.out_of_office_rate:
            returns_on = (sent_at + timedelta(days=int(rng.integers(2, 15)))).date()
            text = write_reply(ReplyKind.OUT_OF_OFFICE, rng, self.prospect.first_name, sender, returns_on)
            return Reaction(False, machine, None, ReplyKind.OUT_OF_OFFICE,
                            sent_at + timedelta(minutes=float(rng.uniform(1, 30))), text, returns_on)
        kinds = self.reply_kind_probabilities(email)
        draw, kind = rng.random(), None
        for candidate, p in kinds.items():
            if draw < p:
                kind = candidate
                break
            draw -= p
        open_delay = self._delay(rng, r.open_delay_median_h)
        if kind is None:
            p_open, p_any = self.open_probability(email), sum(kinds.values())
            opened = rng.random() < max(0.0, (p_open - p_any) / (1 - p_any))
            return Reaction(False, machine, sent_at + open_delay if opened else None, None, None, None, None)
        reply_delay = self._delay(rng, r.reply_delay_median_h)
        opened_at = sent_at + min(open_delay, reply_delay - timedelta(minutes=1))
        text = write_reply(kind, rng, self.prospect.first_name, sender, None)
        return Reaction(False, machine, max(opened_at, sent_at), kind, sent_at + reply_delay, text, None)


def _first_name(sender: str) -> str:
    name = sender.split("<")[0].strip().strip('"')
    return name.split()[0] if name and "@" not in name else ""
