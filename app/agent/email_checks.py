"""Checks of an email that a salesperson applies before sending it, each one a rule that an email keeps or breaks.

The embedded composer writes to these rules and the embedded judge grades by them (its rubric is in
`app/backends/embedded/judge.py`); `propose_email` reports the surface ones back to the agent. They read plain
text, so they apply as well to an email a language model wrote, within what word matching can tell.
"""

import re
from dataclasses import dataclass
from functools import lru_cache

from app.agent.names import Addressee, of_prospect
from app.agent.text import article, sentences, terms, words

IDEAL_WORDS = (70, 170)
CONCISE_WORDS = 125  # a cold email a busy reader reads to the end: up to this many words, then less the longer it runs
PLAIN_SENTENCE_WORDS = (20, 40)  # a sentence's mean length that reads easily, and one that no longer does
_ASK = frozenset(terms("call chat meet meeting talk schedule book send share walk show demo worth open interested priority connect minutes time"))
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")

# What a reader takes an ask (or a goal) to be about. `app.loop.features.perceived_cta`, a trait of the outcome
# model, reads the narrower first five meeting cues and the resource cues.
MEETING_CUES = ("call", "meeting", "minutes", "meet", "demo", "minute", "briefing", "conversation", "walkthrough",
                "walk through", "chat", "session")
RESOURCE_CUES = ("send", "share", "summary", "guide", "report", "case study", "package", "whitepaper", "checklist")
_QUESTION_OPENERS = frozenset(
    "would could can shall should may might will do does did is are was were have has what when which how who where why "
    "any interested open worth".split())
_BAD_JOINS = re.compile(
    r"\b(?:call|meeting|conversation|chat)\s+of\b|\b(?:about|of|on|for|to|regarding)\s+(?:about|of|on|for|regarding)\b", re.I)
_DOUBLED = re.compile(r"\b([A-Za-z]+)\s+\1\b", re.I)
_ARTICLE = re.compile(r"\b(a|an)\s+([a-z][a-z'-]*)")
_BAD_POSSESSIVE = re.compile(r"\b[A-Z][\w&.-]*s's\b")
# Verbs that make a pain a clause; none of them doubles as a noun a pain would use ("costs", "runs" and "needs" do).
FINITE_VERBS = _FINITE = frozenset(
    "is are was were has have had does do did can cannot can't won't don't doesn't isn't aren't wasn't weren't will "
    "would must should may might take takes took keep keeps kept grow grows grew fail fails slip slips drag drags eat "
    "eats lack lacks spend spends sit sits stay stays go goes went come comes came get gets got make makes made".split())
_NUMBER = re.compile(r"[$€£]?\d[\d,.]*[%+]?")
FACT_USE = 0.7  # the share of a fact sentence's content words a sentence of the email must carry to use it


def has_call_to_action(body: str) -> bool:
    """A question near the end that asks for something."""
    tail = [s.strip() for s in _SENTENCE.findall(body) if s.strip()][-4:]
    return any(s.endswith("?") and terms(s) & _ASK for s in tail)


def length_score(body: str) -> float:
    n = words(body)
    low, high = IDEAL_WORDS
    if n < low:
        return max(0.0, n / low)
    if n > high:
        return max(0.0, 1 - (n - high) / high)
    return 1.0


def structure_score(subject: str, body: str) -> float:
    lines = [line.strip() for line in body.strip().splitlines() if line.strip()]
    checks = [
        2 <= len(subject.split()) <= 12,
        bool(lines) and lines[0].endswith((",", "—", ":")),  # a greeting line
        len(lines) >= 3,  # greeting, content, sign-off
    ]
    return 0.5 * length_score(body) + 0.5 * sum(checks) / len(checks)


def personalization_score(subject: str, body: str, prospect: dict) -> float:
    text = f"{subject}\n{body}"
    greeting = body.strip().splitlines()[0] if body.strip() else ""
    checks = [
        greets(greeting, of_prospect(prospect)),
        str(prospect.get("company", "")) in text,
        bool(terms(f"{prospect.get('role', '')} {prospect.get('industry', '')}") & terms(text)),
    ]
    return sum(checks) / len(checks)


def greets(greeting: str, who: Addressee) -> bool:
    """Whether a greeting line greets this person as their name says to: by their given name or with their honorific,
    or, when their name does not say how (`app.agent.names`), by no name at all."""
    if who.given or who.formal:
        return any(name and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", greeting) for name in (who.given, who.formal))
    return greeting.rstrip(",:—").strip().lower() in ("hello", "hi", "hi there", "good morning", "good afternoon", "dear all")


# ---------------------------------------------------------------- the email's parts


@dataclass
class Parts:
    """An email body read as a salesperson reads it: greeting, the sentences in between, the ask, the sign-off."""

    greeting: str
    content: list[str]  # the sentences between greeting and sign-off, in order
    closing: list[str]  # those of them in the last paragraph (the ask's), or the last two of a single paragraph
    questions: list[str]

    @property
    def ask(self) -> str | None:
        """The last question, if it is among the last three sentences: an ask near the end."""
        return self.questions[-1] if self.questions and self.questions[-1] in self.content[-3:] else None


def read_parts(body: str) -> Parts:
    lines = [line.strip() for line in body.strip().splitlines()]
    greeting = ""
    if lines and lines[0] and words(lines[0]) <= 6 and lines[0].endswith((",", "—", ":")):
        greeting, lines = lines[0], lines[1:]
    while lines and (not lines[-1] or (words(lines[-1]) <= 5 and not lines[-1].endswith((".", "?", "!")))):
        lines.pop()  # the sign-off: short lines that are not sentences ("Best,", "Alex")
    paragraphs = [p for p in "\n".join(lines).split("\n\n") if p.strip()]
    content = [s for p in paragraphs for s in sentences(p)]
    closing = sentences(paragraphs[-1]) if len(paragraphs) > 1 else content[-2:]
    return Parts(greeting, content, closing, [s for s in content if s.endswith("?")])


# ---------------------------------------------------------------- pains and facts


def is_clause(pain: str) -> bool:
    """Whether a pain is written as a clause ("reviews take months") rather than a noun phrase ("slow reviews"):
    a finite verb after its first word."""
    return any(word in _FINITE for word in pain.lower().split()[1:])


def speaks_to(found: frozenset[str], pain: str) -> int:
    """How strongly a text's content words speak to a pain: the pain's terms it shares, a capitalised one (an acronym
    or a name: "PHI", "Airflow") counting twice; 0 unless that makes two, or half of the pain's terms (one word of
    a pain of two). One ordinary word of three ("data" of "stale inventory data") is not enough."""
    pain_terms, specific = _pain_terms(pain)
    n = len(found & pain_terms) + len(found & specific)
    return n if n and (n >= 2 or 2 * n >= len(pain_terms)) else 0


@lru_cache(maxsize=1 << 12)
def _pain_terms(pain: str) -> tuple[frozenset[str], frozenset[str]]:
    """A pain's terms, and those of them that are capitalised (acronyms and names)."""
    pain_terms = terms(pain)
    return pain_terms, pain_terms & terms(" ".join(w for w in pain.split() if any(c.isupper() for c in w)))


def uses_fact(sentence_terms: frozenset[str], fact: str) -> bool:
    """Whether a sentence of the email carries a fact sentence: FACT_USE of its content words, and at least two."""
    fact_terms = terms(fact)
    shared = len(fact_terms & sentence_terms)
    return shared >= 2 and shared >= FACT_USE * len(fact_terms)


def used_facts(parts: Parts, facts: list[str]) -> list[str]:
    """The fact sentences (of the cited nodes) that some sentence of the email carries."""
    found = [terms(s) for s in parts.content]
    return [fact for fact in facts if any(uses_fact(t, fact) for t in found)]


def has_figure(text: str) -> bool:
    """Whether a text states a quantity ("64%", "$410,000", "6 weeks", "10,000+ tables"): a number that is not part of
    a name ("SOC 2", "Oracle 11g", the word before it capitalised) and not a year."""
    for m in _NUMBER.finditer(text):
        before = text[:m.start()].split()
        if before and before[-1][:1].isupper() and not text[:m.start()].endswith(("$", "€", "£")):
            continue
        if re.fullmatch(r"(?:19|20)\d\d", m.group(0).rstrip(".,")):
            continue
        return True
    return False


def pain_answers(parts: Parts, pains: list[str], answers: list[str]) -> dict[str, tuple[float, bool]]:
    """Per pain, how fully the email answers it and whether with a figure: the largest share of the pain's terms
    (`speaks_to`'s count, capped at all of them) that an answer the email uses carries, and whether one of the used
    answers that speak to it has a number in it. (0.0, False) for a pain no used answer speaks to."""
    used = [(terms(a), has_figure(a)) for a in used_facts(parts, answers)]
    found = {}
    for pain in pains:
        size = max(1, len(terms(pain)))
        spoken = [(min(1.0, speaks_to(t, pain) / size), figure) for t, figure in used if speaks_to(t, pain)]
        found[pain] = (max(c for c, _ in spoken), any(f for _, f in spoken)) if spoken else (0.0, False)
    return found


def concision(body: str) -> float:
    """1 up to CONCISE_WORDS words (and from IDEAL_WORDS' low end), falling to 0 at twice as many; less below."""
    n = words(body)
    if n < IDEAL_WORDS[0]:
        return n / IDEAL_WORDS[0]
    return max(0.0, min(1.0, 2 - n / CONCISE_WORDS))


def readability(parts: Parts) -> float:
    """1 when the sentences average at most PLAIN_SENTENCE_WORDS[0] words, 0 at PLAIN_SENTENCE_WORDS[1] or more."""
    if not parts.content:
        return 0.0
    mean = sum(words(s) for s in parts.content) / len(parts.content)
    low, high = PLAIN_SENTENCE_WORDS
    return max(0.0, min(1.0, (high - mean) / (high - low)))


def echoed_pains(parts: Parts, pains: list[str], facts: list[str] = ()) -> list[str]:
    """Pains echoed rather than referred to: set as a heading (a sentence that opens, after at most three words, with
    the pain and a colon or dash: "Regarding slow audits: …") or written out word for word more than once outside
    the quoted facts (`facts`: the cited nodes' sentences; a fact may name the pain it answers)."""
    text = " ".join(parts.content).lower()
    for fact in facts:  # as quoted, or after its subject was turned into a pronoun
        fact = fact.lower().rstrip(".")
        tail = fact.split(" ", 2)[-1]
        text = text.replace(fact, " ").replace(tail if words(tail) >= 4 else fact, " ")
    echoed = []
    for pain in pains:
        heading = re.compile(rf"^(?:[\w'-]+\s+){{0,3}}{re.escape(pain.lower())}\s*[:—–-]")
        if any(heading.match(s.lower()) for s in parts.content) or text.count(pain.lower()) > 1:
            echoed.append(pain)
    return echoed


def filler(parts: Parts, pains: list[str], facts: list[str], seller: str = "") -> list[str]:
    """Sentences before the ask that carry no fact, speak to no pain and do not say who writes: template filler
    ("a hard problem for teams like yours") that a fact could replace."""
    found = []
    for sentence in parts.content:
        if sentence in parts.closing:
            continue
        t = terms(sentence)
        if any(uses_fact(t, f) for f in facts) or any(speaks_to(t, p) for p in pains):
            continue
        if seller and seller.lower() in sentence.lower():
            continue
        found.append(sentence)
    return found


def names_seller(parts: Parts, name: str, about: str) -> float:
    """1 when the email names the seller and, in the same sentence, says what it does (two content words of the
    seller's own description besides its name); 0.5 when it only names it; 0 when it does not. 1 with no seller."""
    if not name:
        return 1.0
    naming = [s for s in parts.content if name.lower() in s.lower()]
    if not naming:
        return 0.0
    what = terms(about) - terms(name)
    return 1.0 if any(len(terms(s) & what) >= 2 for s in naming) else 0.5


# ---------------------------------------------------------------- grammar


def ask_kind(text: str) -> str | None:
    """ "meeting" or "resource" by the cue words of an ask or a goal; None when it names neither."""
    low = text.lower()
    if any(cue in low for cue in MEETING_CUES):
        return "meeting"
    if any(cue in low for cue in RESOURCE_CUES):
        return "resource"
    return None


def ask_problems(parts: Parts) -> list[str]:
    """What keeps the ask from being one clear, grammatical question near the end."""
    ask = parts.ask
    if ask is None:
        return ["no question near the end"]
    problems = []
    if len(parts.questions) > 1:
        problems.append(f"{len(parts.questions)} questions: more than one ask")
    first = re.sub(r"^(?:so|and|but|then),?\s+", "", ask, flags=re.I).split()[0].lower().strip(",")
    if first not in _QUESTION_OPENERS:
        problems.append(f"the ask does not open as a question ({first!r})")
    if words(ask) > 40:
        problems.append("the ask runs over 40 words")
    for question in parts.questions:
        problems += [f"the ask: {p}" for p in grammar_problems([question])]
        problems += [f"the ask: '{m.group(0)}'" for m in _BAD_JOINS.finditer(question)]
    return problems


def grammar_problems(sentences_: list[str], names: list[str] = ()) -> list[str]:
    """Possessives ("Hydraulics's"), a/an before an ordinary word, doubled words, a sentence that starts in lower
    case, and a product or feature named bare at the start of a sentence (or after a colon) before the email said
    what it is (`names`: the names of the cited products and features)."""
    problems = []
    for s in sentences_:
        problems += [f"possessive {m.group(0)!r}" for m in _BAD_POSSESSIVE.finditer(s)]
        problems += [f"'{a} {w}'" for a, w in _ARTICLE.findall(s) if a != article(w) and not w[0].isdigit()]
        problems += [f"doubled {m.group(0)!r}" for m in _DOUBLED.finditer(s)]
        if s[:1].islower():
            problems.append(f"lower-case start {s[:20]!r}")
    text = " ".join(sentences_)
    starts = {0} | {m.end() for m in re.finditer(r"[.!?:]\s+", text)}  # a sentence's start, or a clause's after a colon
    for name in names:
        first = re.search(rf"\b{re.escape(name)}\b", text, re.I)
        if first and first.start() in starts:
            problems.append(f"{name!r} opens a sentence before the email says what it is")
    return problems


def draft_feedback(subject: str, body: str, prospect: dict) -> dict:
    parts = read_parts(body)
    return {
        "words": words(body),
        "ideal_words": list(IDEAL_WORDS),
        "has_call_to_action": has_call_to_action(body),
        "ask_problems": ask_problems(parts),
        "grammar_problems": grammar_problems(parts.content),
        "echoed_pains": echoed_pains(parts, [str(p) for p in prospect.get("pains") or []]),
        "personalization": round(personalization_score(subject, body, prospect), 2),
        "structure": round(structure_score(subject, body), 2),
    }
