"""How a simulated reader reads an email: sentences, the words they are about, and the kinds of detail they carry.

Plain text only, as a reader's eye takes it in: no knowledge of which facts a composer chose or why.
"""

import re
from dataclasses import dataclass
from functools import lru_cache

from app.simulation.lexicon import (
    ASK_KINDS,
    ASK_OPENERS,
    CUSTOMER_CUES,
    GREETINGS,
    HOLLOW,
    INDUSTRY_WORDS,
    PRICE_CUES,
    STOPWORDS,
    TOOLS,
    TOPIC_WORDS,
)

_SUFFIXES = ("ations", "ation", "ments", "ment", "ness", "ings", "ing", "ies", "ers", "er", "ed", "es", "ly", "al",
             "s")
_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_NUMBER = re.compile(r"\d")
_MONEY = re.compile(r"[$€£]\s?\d")
_INDUSTRY_OF = {word: industry for industry, words in INDUSTRY_WORDS.items() for word in words}
_CAPITALISED = re.compile(r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*")


def stem(word: str) -> str:
    """A word without its common English endings, so that "leaking", "leaks" and "leak" read alike."""
    word = word.lower().strip("'-")
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def content_stems(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1)


@lru_cache(maxsize=None)
def _alternation(phrases: tuple[str, ...]) -> re.Pattern:
    ordered = sorted(phrases, key=len, reverse=True)
    return re.compile(rf"(?<![a-z0-9])(?:{'|'.join(re.escape(p) for p in ordered)})(?![a-z0-9])")


def mentions(text_lower: str, phrases) -> list[str]:
    """The phrases (lower case) found in the text as whole words, in the text's order."""
    phrases = tuple(phrases)
    if not phrases:
        return []
    return list(dict.fromkeys(_alternation(phrases).findall(text_lower)))


@lru_cache(maxsize=None)
def _topic_stems() -> tuple[frozenset[str], ...]:
    return tuple(frozenset().union(*(content_stems(w) for w in words)) for words in TOPIC_WORDS)


@lru_cache(maxsize=4096)
def pain_words(pain: str) -> frozenset[str]:
    """What speaks to a pain: its own words, and those of every topic it shares a word with."""
    own = content_stems(pain)
    return own.union(*(topic for topic in _topic_stems() if topic & own))


@dataclass(frozen=True)
class Sentence:
    text: str
    stems: frozenset[str]
    number: bool  # a figure (a percentage, a count, an amount, a duration)
    price: bool
    tools: tuple[str, ...]
    industries: tuple[str, ...]
    customer: bool  # cites a customer or what one achieved
    hollow: bool  # a claim with nothing checkable in it
    ask: str | None  # what the sentence asks of the reader: trial, resource, meeting, reply; None if nothing


@dataclass(frozen=True)
class Reading:
    subject: str
    greeting_name: str | None  # the name the email greets, if it greets one
    sentences: tuple[Sentence, ...]
    words: int  # of the body

    @property
    def asks(self) -> list[Sentence]:
        return [s for s in self.sentences if s.ask is not None]


def _ask(lower: str) -> str | None:
    if not (lower.rstrip().endswith("?") or mentions(lower, ASK_OPENERS)):
        return None
    for kind, cues in ASK_KINDS:
        if mentions(lower, cues):
            return kind
    return "reply"


def _sentence(text: str) -> Sentence:
    lower = text.lower()
    tools = tuple(mentions(lower, TOOLS))
    industries = tuple(dict.fromkeys(_INDUSTRY_OF[w] for w in mentions(lower, _INDUSTRY_OF)))
    ask = _ask(lower)
    number = bool(_NUMBER.search(text)) and ask is None  # "a 20-minute call" is an ask, not a figure
    price = bool(_MONEY.search(text)) or bool(mentions(lower, PRICE_CUES))
    names_someone = any(m.group(0) != text.split()[0] for m in _CAPITALISED.finditer(text)) if text.split() else False
    customer = bool(mentions(lower, CUSTOMER_CUES)) and (names_someone or number)
    hollow = bool(mentions(lower, HOLLOW)) and not (number or price or tools or customer)
    return Sentence(text=text, stems=content_stems(text), number=number, price=price, tools=tools,
                    industries=industries, customer=customer, hollow=hollow, ask=ask)


@lru_cache(maxsize=2048)
def read(subject: str, body: str) -> Reading:
    lines = [line.strip() for line in body.strip().splitlines()]
    greeting_name = None
    if lines:
        first = re.match(rf"^(?:{'|'.join(GREETINGS)})[\s,]+(?:(?:mr|ms|mrs|dr)\.?\s+)?([A-Z][\w'-]+)", lines[0],
                         re.IGNORECASE)
        if first:
            greeting_name = first.group(1)
            lines = lines[1:]
    text = "\n".join(lines)
    sentences = tuple(_sentence(s.strip()) for s in _SENTENCE_END.split(text) if s and s.strip())
    return Reading(subject=subject, greeting_name=greeting_name, sentences=sentences,
                   words=len(_WORD.findall(body.lower())))
