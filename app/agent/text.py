"""Bag-of-words helpers shared by the embedded policy, the embedded judge and the feedback simulator."""

import re
from functools import lru_cache

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the and or of to in on for with by at from as is are was were be been our your their its "
    "this that these those it we you they i us them can will not no into over per via than then so "
    "how what who why when which all any more most less very up out about".split()
)


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    for suffix in ("ing", "ies", "es", "ed", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


@lru_cache(maxsize=1 << 14)
def terms(text: str) -> frozenset[str]:
    """Content words of a text, lower-cased and lightly stemmed. Cached: a graph's sentences and a prospect's pains are
    read again for every pain, node and rollout."""
    return frozenset(_stem(w) for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP)


def words(text: str) -> int:
    return len(text.split())


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[A-Z0-9$£€])")


def sentences(text: str) -> list[str]:
    """The sentences of a text: split after . ! or ? where the next sentence starts with a capital, a digit or a
    quote (so "e.g. the" and "3.5 hours" stay whole), and at line breaks."""
    return [s.strip() for line in (text or "").splitlines() for s in _SENTENCE_END.split(line) if s.strip()]


def first_sentence(text: str) -> str:
    found = sentences(text)
    return found[0] if found else ""


def article(phrase: str) -> str:
    """ "a" or "an" for a phrase, by how its first word sounds ("an SVP", "a VP", "an hour", "a user")."""
    first = phrase.split()[0] if phrase.split() else ""
    if first[:1].isdigit():  # "an 8-week", "an 11-minute", "an 18-month", but "a 30-minute"
        return "an" if re.match(r"8|1[18](?!\d)", first) else "a"
    letters = re.sub(r"[^A-Za-z]", "", first)
    if not letters:
        return "a"
    if letters.isupper() and (len(letters) > 1 or len(first) == 1):  # an acronym, spelled out
        return "an" if letters[0] in "AEFHILMNORSX" else "a"
    low = letters.lower()
    if low.startswith(("hour", "honest", "honour", "honor", "heir")):
        return "an"
    if low.startswith(("uni", "use", "usu", "uti", "eu", "one", "once", "ur")):
        return "a"
    return "an" if low[0] in "aeiou" else "a"


def possessive(name: str) -> str:
    """ "Acme's", but "Hydraulics'": a name that ends in s takes the apostrophe alone."""
    name = name.strip()
    return f"{name}'" if name.endswith(("s", "S")) else f"{name}'s"
