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


def terms(text: str) -> frozenset[str]:
    """Content words of a text, lower-cased and lightly stemmed."""
    return frozenset(_stem(w) for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP)


def words(text: str) -> int:
    return len(text.split())
